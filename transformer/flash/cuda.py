"""FlashAttention's forward pass as real GPU kernels (CuPy), the tiles in shared memory.

`flash_attention_cuda(q, k, v, causal=...)` takes CuPy arrays with the shapes of
`scaled_dot_product_attention` — q (b, h, n_q, d_h), k and v (b, h_kv, n_k, d_h) — and runs
one of four CUDA kernels, all FlashAttention-2's loop order as in `transformer.flash`:

  "simt"          `kernels/flash_attention_fwd.cu`, the readable one: one thread per query
                  row on the ordinary cores (Br = 64 rows a block), K/V tiles of Bc = 32 keys
                  (16 for d_h = 128) in shared memory, m, l and the output row in registers.
                  float32 and float16.
  "tensor_cores"  `kernels/flash_attention_fwd_tc.cu`: 4 warps a block, each computing
                  S = Q Kᵀ and P V for 16 query rows on tensor cores (WMMA, 16×16×16 tiles),
                  K/V tiles of Bc = 64 keys; S and O pass through shared memory each tile,
                  since a WMMA fragment's layout is unspecified. float16 only.
  "mma"           `kernels/flash_attention_fwd_mma.cu`, built as FlashAttention-2 is: the PTX
                  instruction mma.sync.m16n8k16, whose fragment layout is documented, so S, P
                  and O stay in registers; Br = 128 rows a block, 32 a warp (16 at d_h = 128);
                  K/V tiles double-buffered with cp.async. float16, GPUs of compute
                  capability 8.0 (A100) or later.
  "mma_tf32"      `kernels/flash_attention_fwd_mma_tf32.cu`: the same for float32, on tensor
                  cores in TF32 (mma.sync.m16n8k8) with each number split into two TF32 parts
                  and three products per product ("3xTF32"), which keeps float32's accuracy.
                  Bc = 64 keys (32 for d_h = 128). Compute capability 8.0 or later.

"auto" (the default) takes the fastest kernel the GPU runs, as measured on an H100: "mma" for
float16 and "mma_tf32" for float32 from compute capability 8.0; before that, for float16,
"tensor_cores" where the GPU (7.0 or later) and the CUDA headers allow it; else "simt"
(`auto_kernel` is the rule as a pure function). All
accumulate in float32, skip causal tiles above the diagonal, handle any n, n_q ≠ n_k and
GQA/MQA, and take packed rows (doc=, kernels/packed_rows.cuh: `packed_row_args` gives each
block the keys its documents span, and only key tiles inside it are read).

This module compiles and launches. The host side, as pure functions tested without a GPU (what
to compile, how many blocks, how much shared memory: `launch_plan`), is `cuda_kernels.py`, the
table of kernels `kernel_table.py` (`T.cuda_kernels` for both). The kernels
themselves are tested on the CPU by running their CUDA C on threads (tests/support/cuda_emulator.py)
and on a GPU where there is one.

Only this module is CuPy-specific: the kernels are CUDA C and need a GPU. Everything else in
the package runs on CuPy arrays through the same `xp` code as on NumPy.
Each public entry point checks its input at the door (`cuda_checks.py`, same name).
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import numpy as np

from . import cuda_checks as checks
from ..backend import import_cupy
from ..require import checked_by
from .cuda_checks import check_device
from .cuda_kernels import Kernel, backward_launch_plan, backward_rows, launch_plan, packed_row_args, sum_query_groups

__all__ = ["flash_attention_cuda", "flash_attention_backward_cuda", "kernel_source", "toolkit_include_dirs",
           "wmma_include", "header_options", "cupy_include", "device_facts", "compiled", "NULL"]

NULL = np.uint64(0)  # a null pointer as a kernel argument: DOC and DOC_KEYS without packed rows


def kernel_source(source: Path, headers: Path | None = None) -> str:
    """A kernel's CUDA C with its local headers (`#include "x.cuh"`, from the folder `headers`,
    by default the source's own) pasted in, so the text handed to the compiler, and so CuPy's
    cache key, changes whenever a header does."""
    folder = source.parent if headers is None else headers
    pasted = set()

    def paste(text):  # text with its local headers' texts in place of their #include lines
        return re.sub(r'^#include "([\w.]+)"$', header, text, flags=re.M)

    def header(match):  # its text with its own headers, once (`#pragma once`, which is dropped)
        if match.group(1) in pasted:
            return ""
        pasted.add(match.group(1))
        return paste(re.sub(r"^#pragma once\n", "", (folder / match.group(1)).read_text(), flags=re.M))
    return paste(source.read_text())



def toolkit_include_dirs() -> list[Path]:
    """CUDA header folders besides CuPy's own: $CUDA_PATH, $CUDA_HOME, /usr/local/cuda, and the
    `nvidia-cuda-crt` wheel's (found through its metadata, never imported)."""
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    folders = [Path(r) / "include" for r in roots if r]
    try:
        crt = distribution("nvidia-cuda-crt")
        folders += [Path(crt.locate_file(f)).parent.parent for f in crt.files or ()
                    if str(f).endswith("include/crt/mma.h")]
    except PackageNotFoundError:
        pass
    return folders


def wmma_include(cuda_include: Path | None, candidates) -> tuple[str, ...] | None:
    """What NVRTC needs to compile CUDA's <mma.h> (the WMMA kernel): it reads crt/mma.h, which the
    CUDA wheels that `pip install cupy-cuda13x[ctk]` brings leave out (it ships in `nvidia-cuda-crt`).
    () where CuPy's own header folder `cuda_include` has it; else `-I` the first of `candidates`
    that does; None where none does."""
    def has_crt(folder) -> bool:
        return folder is not None and (Path(folder) / "crt" / "mma.h").is_file()

    if has_crt(cuda_include):
        return ()
    return next(((f"-I{folder}",) for folder in candidates if has_crt(folder)), None)


def header_options(source: str, cuda_include: Path | None, candidates) -> tuple[str, ...]:
    """`-I` options NVRTC needs beyond CuPy's own CUDA headers (the folder `cuda_include`) to
    compile `source`: only a kernel that includes <mma.h> may need one (`wmma_include`); where
    no folder has what it needs, a RuntimeError that says what to install."""
    if "#include <mma.h>" not in source:
        return ()
    found = wmma_include(cuda_include, candidates)
    if found is not None:
        return found
    raise RuntimeError(
        f"kernel='tensor_cores' includes <mma.h>, which needs crt/mma.h, and CuPy's CUDA headers "
        f"({cuda_include}) lack it: pip install nvidia-cuda-crt (CUDA 13; it is in requirements-dev.txt), "
        f"or set CUDA_PATH to a CUDA toolkit, or use kernel='mma'")


def cupy_include(cupy) -> Path | None:
    """The CUDA header folder CuPy compiles with."""
    cuda_path = cupy.cuda.get_cuda_path()
    return Path(cuda_path) / "include" if cuda_path else None


@lru_cache(maxsize=None)
def device_facts(device_id: int) -> tuple[int, bool]:
    """This GPU's compute capability (as 90 for 9.0) and whether <mma.h> compiles here."""
    cupy = import_cupy()
    found = wmma_include(cupy_include(cupy), toolkit_include_dirs())
    return int(cupy.cuda.Device(device_id).compute_capability), found is not None


@lru_cache(maxsize=None)
def compiled(kernel: Kernel, options: tuple[str, ...], shared_bytes: int, device_id: int):
    """The kernel built for these -D options on this GPU, once per process (CuPy also caches on disk)."""
    cupy = import_cupy()
    check_device(kernel, device_facts(device_id)[0])  # once, before the first build
    source = kernel_source(kernel.source)
    options += header_options(source, cupy_include(cupy), toolkit_include_dirs())
    fn = cupy.RawKernel(source, kernel.name, options=options)
    fn.compile()  # now, so that a compile error surfaces here and not at the first launch
    if shared_bytes > 48 * 1024:  # past the portable 48 KiB a kernel must opt in
        fn.max_dynamic_shared_size_bytes = shared_bytes
    return fn


@checked_by(checks.flash_attention_cuda)
def flash_attention_cuda(q, k, v, *, causal: bool = False, scale: float | None = None,
                         return_lse: bool = False, kernel: str = "auto", doc=None):
    """softmax(Q Kᵀ/√d_h [+ causal mask]) V on the GPU without forming the n×n matrix.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays -> out (b, h, n_q, d_h) in q's dtype,
    and lse (b, h, n_q) float32 = log Σ_j e^(s_ij) if return_lse. Causal uses the offset
    n_k - n_q (queries are the last positions), as `transformer.causal_mask` does.
    kernel: "auto", "simt", "tensor_cores", "mma" (those two float16 only) or "mma_tf32" (float32
    only); see the module docstring. A NaN or ∞ in q or k gives NaN in the rows torch's softmax
    makes NaN (never a silent 0); a NaN in v reaches the rows whose blocks read its key tile, also
    where a mask hides the key (0 · NaN; torch's dense P V: every row). A row whose scores are all
    -∞ counts as one that saw no key (O = 0, lse = -∞). With "mma_tf32" (float32's "auto" from
    compute capability 8.0) an ∞ input makes every row that sees it NaN.
    doc: packed rows, as in `flash_attention`: (b, n) document index of each position (-1 =
    padding, n = n_q = n_k); a query reads only keys of its own document, key tiles outside its
    tile's documents are skipped (`packed_row_args`), and padding rows get zeros, lse = -∞.
    """
    cupy = import_cupy()
    b, h, n_q, d_h = q.shape
    # contiguous, and 16-byte aligned for the tensor-core kernel's 16-byte loads
    q, k, v = (t if t.flags.c_contiguous and t.data.ptr % 16 == 0 else t.copy() for t in (q, k, v))
    out = cupy.empty_like(q)  # [b, h, n_q, d_h]
    lse = cupy.empty((b, h, n_q), dtype=cupy.float32)  # [b, h, n_q]
    if n_q == 0 or b * h == 0:
        return (out, lse) if return_lse else out
    device_id = cupy.cuda.get_device_id()
    compute_capability, wmma_headers = device_facts(device_id)
    # causal, scale and kernel were checked at this door
    plan = launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale, kernel=kernel,
                       compute_capability=compute_capability, wmma_headers=wmma_headers)
    fn = compiled(plan.kernel, plan.options, plan.shared_bytes, device_id)
    packed = (NULL, NULL) if doc is None else tuple(cupy.asarray(a) for a in packed_row_args(doc, plan.kernel.block_q))
    fn(plan.grid, plan.block, (q, k, v, out, lse, *plan.scalars, *packed), shared_mem=plan.shared_bytes)
    return (out, lse) if return_lse else out


@checked_by(checks.flash_attention_backward_cuda)
def flash_attention_backward_cuda(dout, q, k, v, out, lse, *, causal: bool = False, scale: float | None = None,
                                  doc=None, kernel: str = "auto"):
    """The gradients of `flash_attention_cuda` on the GPU, by recomputation.

    dout, q, out (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays, float32 or float16, and
    lse (b, h, n_q) float32 from `flash_attention_cuda(..., return_lse=True)` -> dq (b, h, n_q, d_h),
    dk, dv (b, h_kv, n_k, d_h) in q's dtype. The same formulas as `flash_attention_backward`: P is
    rebuilt tile by tile from the saved lse, never whole; accumulation in float32.
    kernel: "simt" (kernels/flash_attention_bwd.cu, the readable one: a thread per key, float32
    and float16), "mma" (kernels/flash_attention_bwd_mma.cu: 4 warps on tensor cores, every
    product an mma.sync.m16n8k16; float16, compute capability 8.0 or later), "mma_tf32"
    (kernels/flash_attention_bwd_mma_tf32.cu: the same for float32 in TF32, three products a
    product, float32's accuracy; compute capability 8.0 or later) or "auto": the tensor-core kernel
    of the dtype where it runs, else "simt" (`backward_auto_kernel`).
    doc: the packed rows' document indices given to the forward pass (see `flash_attention_cuda`);
    a key tile then visits only the query tiles of its documents.
    """
    cupy = import_cupy()
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    # contiguous, and 16-byte aligned for the tensor-core kernel's 16-byte copies
    q, k, v, dout = (t if t.flags.c_contiguous and t.data.ptr % 16 == 0 else t.copy() for t in (q, k, v, dout))
    L, D = backward_rows(dout, out, lse)  # [b, h, n_q] float32 each
    dq = cupy.zeros((b, h, n_q, d_h), dtype=cupy.float32)  # [b, h, n_q, d_h] the blocks add to it
    dk = cupy.zeros((b, h, n_k, d_h), dtype=cupy.float32)  # [b, h, n_k, d_h] per query head
    dv = cupy.zeros((b, h, n_k, d_h), dtype=cupy.float32)
    if n_q and n_k and b * h:
        device_id = cupy.cuda.get_device_id()
        # causal, scale and kernel were checked at this door
        plan = backward_launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale, kernel=kernel,
                                    compute_capability=device_facts(device_id)[0])
        fn = compiled(plan.kernel, plan.options, plan.shared_bytes, device_id)
        packed = (NULL, NULL) if doc is None else tuple(cupy.asarray(a) for a in packed_row_args(doc, plan.tile))
        fn(plan.grid, plan.block, (q, k, v, dout, cupy.ascontiguousarray(L), cupy.ascontiguousarray(D),
                                   dq, dk, dv, *plan.scalars, *packed), shared_mem=plan.shared_bytes)
    return (dq.astype(q.dtype), sum_query_groups(dk, h_kv).astype(k.dtype),  # [b, h_kv, n_k, d_h]
            sum_query_groups(dv, h_kv).astype(v.dtype))
