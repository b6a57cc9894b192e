"""Every refusal of FlashAttention's public functions, one check per function and of the same name.

A formula in `flash/` names its check at the door (`@checked_by(checks.flash_attention)`); the
check receives every argument by keyword, the formula's defaults filled in (it states none), and
raises a one-line error naming the bad value, or returns None. Checks shared by several doors (the
tiles' shapes, the options, packed rows' documents, the kernels' inputs) are the small functions at
the top; the core's own (a scale, attention's shapes) come from `core.checks`.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_xp, import_cupy
from ..core import checks as core_checks
from ..require import require_array, require_bool, require_float, require_int
from .kernel_table import HEAD_SIZES, KERNELS


# --- shared pieces --------------------------------------------------------------------------
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


def kernel_name(kernel):
    """"auto" or a kernel of the table."""
    if kernel != "auto" and kernel not in KERNELS:
        raise ValueError(f"kernel={kernel!r}: use 'auto', {', '.join(repr(k) for k in KERNELS)}")


def plan_options(causal, scale, kernel):
    """The host-side options of a launch, as the CPU `flash_attention` checks them."""
    require_bool(causal=causal)
    core_checks.optional_scale(scale)
    kernel_name(kernel)


def check_inputs(q_shape, k_shape, v_shape, dtypes, kernel: str = "auto") -> None:
    """Clear errors for shapes, dtypes and kernel choices the kernels cannot take."""
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(shape) != 4:
            raise ValueError(f"{name} must have 4 dims (b, heads, n, d_h), got shape {tuple(shape)}")
    names = [str(d) for d in dtypes]
    if len(set(names)) != 1 or names[0] not in ("float32", "float16"):
        raise TypeError(f"q, k, v must all be float32 or all float16, got {', '.join(names)}")
    b, h, n_q, d_h = q_shape
    _, h_kv, n_k, _ = k_shape
    if tuple(k_shape) != tuple(v_shape) or k_shape[0] != b or k_shape[3] != d_h:
        raise ValueError(f"k {tuple(k_shape)} and v {tuple(v_shape)} must be (b={b}, h_kv, n_k, d_h={d_h})")
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if d_h not in HEAD_SIZES:
        raise ValueError(f"the kernels are compiled for d_h in {HEAD_SIZES}, got d_h={d_h}")
    kernel_name(kernel)
    if kernel != "auto":
        if names[0] not in KERNELS[kernel].dtypes:
            raise TypeError(f"kernel={kernel!r} takes {' or '.join(KERNELS[kernel].dtypes)}, got {names[0]}")


def check_device(kernel, compute_capability: int) -> None:
    """A clear error where the GPU is too old for `kernel` (compute capability as 80 for 8.0)."""
    need = kernel.min_compute_capability
    if compute_capability < need:
        raise RuntimeError(f"{kernel.source.name} needs a GPU of compute capability {need // 10}.{need % 10} or later, "
                           f"this one is {compute_capability // 10}.{compute_capability % 10}")


def on_gpu(**arrays):
    """Each array a CuPy array (the kernels read device memory)."""
    cupy = import_cupy()
    for name, t in arrays.items():
        if not isinstance(t, cupy.ndarray):
            raise TypeError(f"{name} must be a CuPy array on the GPU, got {type(t).__name__}")


# --- tiled.py -------------------------------------------------------------------------------
def standard_attention(q, k, v, *, causal, scale, return_lse, io):
    tiled_shapes(q, k, v)
    tile_options(causal)
    core_checks.optional_scale(scale)


def flash_attention(q, k, v, *, causal, block_q, block_k, return_lse, scale, version, io, trace, doc):
    tiled_shapes(q, k, v)
    b, h, n_q, _ = q.shape
    tile_options(causal, block_q, block_k)
    core_checks.optional_scale(scale)
    if version not in (1, 2):
        raise ValueError(f"version must be 1 (FlashAttention-1 loop order) or 2, got version={version!r}")
    packed_doc(doc, b, n_q, k.shape[2])
    if trace is not None and not (0 <= trace.batch < b and 0 <= trace.head < h):
        raise ValueError(f"trace watches batch={trace.batch}, head={trace.head}, outside b={b}, h={h}")


def flash_trace_row_history(self, r):
    if not 0 <= r < self.n_q:
        raise ValueError(f"row r must lie in [0, {self.n_q}), got r={r}")


def flash_trace_history(self, name):
    if name not in ("m", "l"):
        raise ValueError(f"history name must be 'm' or 'l', got {name!r}")


# --- tiled_fast.py --------------------------------------------------------------------------
def flash_attention_fast(q, k, v, *, causal, block_q, block_k, return_lse, scale, threads):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, np.ndarray):
            raise TypeError(f"flash_attention_fast runs on NumPy arrays on the CPU, {name} is a {type(t).__name__}: "
                            "use flash_attention (any backend) or flash_attention_cuda")
    tiled_shapes(q, k, v)
    tile_options(causal, block_q, block_k)
    core_checks.optional_scale(scale)
    if threads is not None:
        require_int(threads=threads, low=1)


def cache_bytes(level, root):
    require_int(level=level, low=1)


def fast_block_size(d_h, itemsize, l2):
    require_int(d_h=d_h, itemsize=itemsize, low=1)
    if l2 is not None:
        require_int(l2=l2, low=1)


def flash_attention_fast_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, threads, causal,
                                    h_kv, out_itemsize):
    flash_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, out_itemsize, h_kv)
    require_int(threads=threads, low=1)
    require_bool(causal=causal)


# --- backward.py ----------------------------------------------------------------------------
def attention_backward_naive(dout, q, k, v, *, causal, scale):
    backward_inputs(q, k, v, causal, scale, dout=dout)


def flash_attention_backward(dout, q, k, v, out, lse, *, causal, block_q, block_k, scale, io, doc):
    backward_inputs(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    tile_options(causal, block_q, block_k)
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])


# --- io_count.py ----------------------------------------------------------------------------
def paper_block_sizes(M, d_h):
    require_int(M=M, d_h=d_h, low=1)


def standard_attention_io(n_q, n_k, d_h, heads):
    require_int(n_q=n_q, n_k=n_k, d_h=d_h, heads=heads)


def visible_key_tiles(n_q, n_k, block_q, block_k, causal):
    require_int(n_q=n_q, n_k=n_k)
    require_int(block_q=block_q, block_k=block_k, low=1)
    require_bool(causal=causal)


def flash1_io(n_q, n_k, d_h, block_q, block_k, causal, heads):
    require_int(d_h=d_h, heads=heads)
    visible_key_tiles(n_q, n_k, block_q, block_k, causal)


def flash2_io(n_q, n_k, d_h, block_q, block_k, causal, heads):
    flash1_io(n_q, n_k, d_h, block_q, block_k, causal, heads)


def naive_io_bound(n, d_h):
    require_int(n=n, d_h=d_h)


def flash_io_bound(n, d_h, M):
    require_int(n=n, d_h=d_h)
    require_int(M=M, low=1)


def standard_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, causal):
    require_int(b=b, h=h, n_q=n_q, n_k=n_k, d_h=d_h, itemsize=itemsize)


def flash_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, out_itemsize, h_kv):
    h_kv = h if h_kv is None else h_kv  # multi-head attention unless given
    require_int(b=b, h=h, h_kv=h_kv, n_q=n_q, n_k=n_k, d_h=d_h, itemsize=itemsize)
    require_int(block_q=block_q, block_k=block_k, low=1)


# --- cuda_kernels.py ------------------------------------------------------------------------
def mma_fragment_layout(operand, shape):
    if shape not in ("m16n8k16", "m16n8k8"):
        raise ValueError(f"shape must be 'm16n8k16' (float16) or 'm16n8k8' (TF32), got {shape!r}")
    if operand not in ("A", "B", "C"):
        raise ValueError(f"operand must be 'A', 'B' or 'C', got {operand!r}")


def launch_plan(q_shape, k_shape, dtype_name, *, causal, scale, kernel, compute_capability, wmma_headers):
    plan_options(causal, scale, kernel)


def backward_launch_plan(q_shape, k_shape, dtype_name, *, causal, scale):
    plan_options(causal, scale, "auto")


def packed_row_args(doc, block_q):
    require_array("doc", doc)
    require_int(block_q=block_q, low=1)
    if doc.ndim != 2 or not get_xp(doc).isdtype(doc.dtype, "integral"):
        raise ValueError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                         f"shape {tuple(doc.shape)}")


def key_tiles_read(n, block_q, block_k, *, causal, doc):
    require_int(n=n, block_q=block_q, block_k=block_k, low=1)
    require_bool(causal=causal)
    if doc is not None:
        packed_row_args(doc, block_q)
        if doc.shape[1] != n:
            raise ValueError(f"doc must hold n={n} positions a row, got shape {tuple(doc.shape)}")


# --- cuda.py --------------------------------------------------------------------------------
def flash_attention_cuda(q, k, v, *, causal, scale, return_lse, kernel, doc):
    on_gpu(q=q, k=k, v=v)
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), kernel)
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])
    plan_options(causal, scale, kernel)


def flash_attention_backward_cuda(dout, q, k, v, out, lse, *, causal, scale, doc):
    on_gpu(dout=dout, q=q, k=k, v=v, out=out, lse=lse)
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), "simt")
    backward_inputs(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    if dout.dtype != q.dtype:
        raise TypeError(f"dout must have q's dtype {q.dtype}, got {dout.dtype}")
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])
