"""A GGUF file read in the same walk that checks it: its metadata as Python values, its tensors as NumPy views of
the mapped file.

    f = read_gguf(path)               # gguf_header's walk: every count and length checked before it is used
    f.get_field("llama.block_count").contents()     # 30
    t = f.tensors[0]; t.name, t.tensor_type, t.data  # 'token_embd.weight', Q8_0, uint8 (v, d/32·34) view

The names follow `gguf.GGUFReader`'s (fields, get_field, contents(), types; tensors with name, tensor_type,
shape, n_elements, n_bytes, data_offset, data laid out as that reader lays it out, so `gguf.quants.dequantize`
reads it), which the tests compare it with. The reader of the `gguf` package builds a NumPy view for every part of
every value (three per string: 0.1 M strings in SmolLM2's vocabulary and merges) and took 1.7–2.1 s to open
SmolLM2's file here; this walk reads each string once, about 0.15 s.
"""
from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from .gguf_header import ARRAY, block_sizes, check_layout, mapped

__all__ = ["GGUFField", "GGUFTensor", "GGUFFile", "read_gguf", "dequantize_blocks", "BLOCK_FORMATS"]

# a tensor's NumPy type by its ggml type, as gguf.GGUFReader gives it; every other type is read as its bytes
PLAIN_TYPES = {0: "f4", 1: "f2", 28: "f8", 24: "i1", 25: "i2", 26: "i4", 27: "i8"}  # F32 F16 F64 I8 I16 I32 I64


class GGUFField(NamedTuple):
    """One metadata key: its value types ([type], or [ARRAY, element type]) and its value."""
    name: str
    types: list
    value: Any

    def contents(self):
        return list(self.value) if isinstance(self.value, list) else self.value  # a copy: the file's stays as read


class GGUFTensor(NamedTuple):
    """One tensor: shape is GGUF's (ne0 first: d_in of a matrix), data the mapped bytes in NumPy's order
    (d_out, d_in), or (d_out, the bytes of a row) for a quantized type."""
    name: str
    tensor_type: Any  # gguf.GGMLQuantizationType
    shape: tuple
    n_elements: int
    n_bytes: int
    data_offset: int
    data: np.ndarray


class GGUFFile:
    """The metadata and tensors of one GGUF file (read_gguf)."""

    def __init__(self, fields: dict, tensors: list):
        self.fields, self.tensors = fields, tensors

    def get_field(self, key: str) -> GGUFField | None:
        return self.fields.get(key)


def read_gguf(path) -> GGUFFile:
    """Walk the file with gguf_header's checks (one line naming the key, tensor or count that does not fit) and
    return what it holds; the tensors' data stay in the mapped file until read."""
    from gguf import GGMLQuantizationType, GGUFValueType
    from gguf.quants import quant_shape_to_byte_shape

    path = os.fspath(path)
    sizes = block_sizes()
    with mapped(path) as cur:
        values, infos, start = check_layout(cur, sizes)
        endian = cur.endian
    fields = {key: GGUFField(key, [GGUFValueType(vtype)] + ([GGUFValueType(etype)] if vtype == ARRAY else []), value)
              for key, (vtype, etype, value) in values.items()}
    raw = np.asarray(np.memmap(path, dtype=np.uint8, mode="r")) if infos else None  # kept alive by its views
    tensors = []
    for name, dims, gtype, offset, n_bytes in infos:
        kind = GGMLQuantizationType(gtype)
        shape = tuple(reversed(dims))  # NumPy's order: ne0 varies fastest, so it is the last axis
        at = start + offset
        if gtype in PLAIN_TYPES:
            data = raw[at:at + n_bytes].view(np.dtype(PLAIN_TYPES[gtype]).newbyteorder(endian)).reshape(shape)
        else:
            data = raw[at:at + n_bytes].reshape(quant_shape_to_byte_shape(shape, kind))
        tensors.append(GGUFTensor(name, kind, tuple(dims), int(np.prod(dims, dtype=object)), n_bytes, at, data))
    return GGUFFile(fields, tensors)


# --- the three block formats of SmolLM2's file (and most small GGUF models), dequantized in whole rows -------
# A block holds 32 numbers: a float16 scale d (and a float16 minimum m for Q4_1), then the 32 codes q,
#     Q8_0: x = d · q,        q int8                       34 bytes a block
#     Q4_0: x = d · (q − 8),  q 4 bits, two to a byte      18 bytes
#     Q4_1: x = d · q + m,    q 4 bits, two to a byte      20 bytes
# A 4-bit byte holds code j in its low half and code j + 16 in its high half. The `gguf` package does the same
# maths a few rows at a time (12,800 calls for SmolLM2, 1.0 s); whole rows at once take a fraction of that.
BLOCK_FORMATS = {8: ("Q8_0", 34), 2: ("Q4_0", 18), 3: ("Q4_1", 20)}  # ggml type -> (name, bytes a block)
ROWS_AT_ONCE = 4096  # bounds the float32 temporaries: 4096 rows of the 576-wide embedding are 9 MB


def dequantize_blocks(data, gtype: int):  # [rows, bytes a row] uint8 -> [rows, 32 · blocks a row] float32
    """The numbers of a Q8_0, Q4_0 or Q4_1 tensor, as `gguf.quants.dequantize` gives them (the tests compare)."""
    name, size = BLOCK_FORMATS[gtype]
    if data.shape[-1] % size:
        raise ValueError(f"rows of {data.shape[-1]} bytes are not whole {name} blocks of {size} bytes")
    out = np.empty((*data.shape[:-1], data.shape[-1] // size * 32), dtype=np.float32)
    rows_in, rows_out = data.reshape(-1, data.shape[-1]), out.reshape(-1, out.shape[-1])
    for r in range(0, len(rows_in), ROWS_AT_ONCE):
        blocks = rows_in[r:r + ROWS_AT_ONCE].reshape(-1, size)  # [n_blocks, size]
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # [n_blocks, 1] the scale
        if gtype == 8:
            x = blocks[:, 2:].view(np.int8) * d  # [n_blocks, 32]
        else:
            codes = blocks[:, -16:]  # [n_blocks, 16] two codes a byte
            q = np.concatenate([codes & 0x0F, codes >> 4], axis=1)  # [n_blocks, 32] codes 0 … 15, then 16 … 31
            x = d * (q.astype(np.int8) - np.int8(8)) if gtype == 2 else \
                d * q.astype(np.float32) + blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        rows_out[r:r + ROWS_AT_ONCE] = x.reshape(-1, rows_out.shape[-1])
    return out
