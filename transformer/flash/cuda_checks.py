"""The refusals of `flash/cuda.py`, one check per public entry point and of the same name, and the
kernels' own needs: `check_inputs` (shapes, dtypes, a kernel of the table) and `check_device` (the
GPU's compute capability), which `cuda.py` calls once it knows the device."""
from __future__ import annotations

from ..backend import import_cupy
from ..require import require_bool
from .kernel_table import HEAD_SIZES, KERNELS
from .shared_checks import backward_inputs, backward_kernel_name, kernel_name, packed_doc, plan_options


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


def flash_attention_cuda(q, k, v, *, causal, scale, return_lse, kernel, doc):
    require_bool(return_lse=return_lse)
    on_gpu(q=q, k=k, v=v)
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), kernel)
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])
    plan_options(causal, scale, kernel)


def flash_attention_backward_cuda(dout, q, k, v, out, lse, *, causal, scale, doc, kernel):
    on_gpu(dout=dout, q=q, k=k, v=v, out=out, lse=lse)
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), "simt")
    backward_kernel_name(kernel, str(q.dtype))
    backward_inputs(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    if dout.dtype != q.dtype:
        raise TypeError(f"dout must have q's dtype {q.dtype}, got {dout.dtype}")
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])
