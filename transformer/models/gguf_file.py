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

__all__ = ["GGUFField", "GGUFTensor", "GGUFFile", "read_gguf"]

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
