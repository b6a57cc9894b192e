"""The refusals of `flash/cuda_kernels.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..backend import get_xp
from ..require import require_array, require_bool, require_int
from .shared_checks import backward_kernel_name, plan_options


def mma_fragment_layout(operand, shape):
    if shape not in ("m16n8k16", "m16n8k8"):
        raise ValueError(f"shape must be 'm16n8k16' (float16) or 'm16n8k8' (TF32), got {shape!r}")
    if operand not in ("A", "B", "C"):
        raise ValueError(f"operand must be 'A', 'B' or 'C', got {operand!r}")


def launch_plan(q_shape, k_shape, dtype_name, *, causal, scale, kernel, compute_capability, wmma_headers):
    plan_options(causal, scale, kernel)


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


def backward_launch_plan(q_shape, k_shape, dtype_name, *, causal, scale, kernel, compute_capability):
    plan_options(causal, scale, "auto")
    backward_kernel_name(kernel, dtype_name)
