"""Walk a GGUF file's header, checking each count and length against the file's size before it is used.

A GGUF file starts with counts and lengths that a reader trusts to size its work:

    magic "GGUF" · version u32 · tensor count u64 · key/value count u64
    each key/value:  key (u64 length + UTF-8 bytes) · value type u32 · value
                     value = a scalar, a string (u64 length + bytes), or an array:
                             element type u32 · element count u64 · the elements
    each tensor:     name (string) · n_dims u32 · n_dims × i64 sizes · ggml type u32 · offset u64
    padding to `general.alignment` (default 32), then the tensor data

A 68-byte file may declare an array of 2⁴⁰ elements: `gguf.GGUFReader` would build a Python
object for each one (about 0.7 KB apiece) before noticing the file has ended. `check_layout`
walks the layout with a cursor over a read-only memory map, and compares every count and
length with the bytes left *before* moving on, so its memory stays bounded whatever the header
says; the values it walks are what it returns, so the same walk reads the file (gguf_file.py).
The facts (type codes, layout, the limits on names and dimensions) follow the GGUF specification
and llama.cpp's reader (gguf.cpp).
"""
from __future__ import annotations

import contextlib
import functools
import mmap
import os
import struct

import numpy as np

__all__ = ["VALUE_SIZES", "MAX_KEY_BYTES", "MAX_TENSOR_NAME_BYTES", "MAX_DIMS", "MAX_KV", "MAX_TENSORS",
           "MAX_ARRAY_ELEMENTS", "MAX_STRING_BYTES", "block_sizes", "check_gguf", "scalar_value", "scalar_values"]

STRING, ARRAY = 8, 9  # GGUF value types that carry a length
VALUE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # u8 i8 u16 i16 u32 i32 f32 bool u64 i64 f64
TYPE_NAMES = {0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32", 6: "FLOAT32", 7: "BOOL",
              8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64", 12: "FLOAT64"}
UINT32 = 4
# the struct format of each scalar value type, as VALUE_SIZES lists them, and the NumPy type of an array of them
SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
ARRAY_DTYPES = {0: "u1", 1: "i1", 2: "u2", 3: "i2", 4: "u4", 5: "i4", 6: "f4", 7: "?", 10: "u8", 11: "i8", 12: "f8"}

MAX_KEY_BYTES = 65535            # the specification: a key is at most 2¹⁶ − 1 bytes
MAX_TENSOR_NAME_BYTES = 63       # llama.cpp's GGML_MAX_NAME (64) counts the terminating NUL
MAX_DIMS = 4                     # GGML_MAX_DIMS
MAX_KV = 65536                   # real files hold tens of keys
MAX_TENSORS = 65536              # the largest models hold a few thousand tensors
MAX_ARRAY_ELEMENTS = 1 << 20     # all metadata arrays together; Llama 3's vocabulary, merges and types: 0.54 M
MAX_STRING_BYTES = 16 << 20      # one string (chat templates are tens of KB)
HEADER_BYTES = 24                # magic, version, tensor count, key/value count
MIN_KV_BYTES = 8 + 4 + 1         # empty key, value type, the smallest value
MIN_TENSOR_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims = 0, ggml type, offset


class Cursor:
    """A position in the mapped file; every read first checks that the bytes are there."""

    def __init__(self, buf, size: int):
        self.buf, self.size, self.pos, self.endian = buf, size, 0, "<"

    @property
    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str):
        if n > self.left:
            raise ValueError(f"truncated or corrupt: {what} needs {n} bytes at offset {self.pos}, "
                             f"but only {self.left} remain")

    def number(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        (val,) = struct.unpack_from(self.endian + fmt, self.buf, self.pos)
        self.pos += n
        return val

    def skip(self, n: int, what: str):
        self.need(n, what)
        self.pos += n

    def text(self, what: str, limit: int) -> str:
        """A GGUF string (u64 length, then bytes), checked against `limit` and decoded as UTF-8."""
        n = self.number("Q", f"the length of {what}")
        if n > limit:
            raise ValueError(f"{what} is {n} bytes long, over the limit of {limit}")
        self.need(n, f"{what} ({n} bytes)")
        raw = self.buf[self.pos:self.pos + n]  # at most `limit` bytes
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what} is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None


def element_name(key: str, i: int) -> str:
    """How an array element is named in a message: a vocabulary entry by its token id."""
    return f"token id {i} of {key!r}" if key == "tokenizer.ggml.tokens" else f"element {i} of {key!r}"


def check_value(cur: Cursor, key: str, vtype: int, budget: list) -> tuple:
    """Walk one value of type vtype -> (its element type, None but for an array; the value: a number, a bool, a
    str, or a list of them)."""
    if vtype == STRING:
        return None, cur.text(f"the string value of {key!r}", MAX_STRING_BYTES)
    if vtype in VALUE_SIZES:
        return None, cur.number(SCALAR_FORMATS[vtype], f"the value of {key!r}")
    if vtype != ARRAY:
        raise ValueError(f"key {key!r} has unknown value type {vtype} (known: 0 to 12)")
    etype = cur.number("I", f"the element type of array {key!r}")
    count = cur.number("Q", f"the element count of array {key!r}")
    if etype == ARRAY or etype not in TYPE_NAMES:
        raise ValueError(f"array {key!r} has element type {etype}: expected a scalar or string type (0 to 12 but 9; "
                         "arrays of arrays are not supported)")
    least = 8 if etype == STRING else VALUE_SIZES[etype]  # a string is at least its u64 length
    if count * least > cur.left:
        raise ValueError(f"truncated or corrupt: key {key!r} declares an array of {count} {TYPE_NAMES[etype]} "
                         f"elements (at least {count * least} bytes), but only {cur.left} bytes remain")
    budget[0] += count
    if budget[0] > MAX_ARRAY_ELEMENTS:
        raise ValueError(f"key {key!r} declares an array of {count} elements, which brings the metadata arrays "
                         f"to {budget[0]} elements, over the limit of {MAX_ARRAY_ELEMENTS}")
    if etype == STRING:
        return etype, [cur.text(element_name(key, i), MAX_STRING_BYTES) for i in range(count)]
    numbers = np.frombuffer(cur.buf, cur.endian + ARRAY_DTYPES[etype], count, cur.pos).tolist()  # bounded above
    cur.skip(count * least, f"the elements of array {key!r}")
    return etype, numbers


def check_tensor_info(cur: Cursor, i: int, names: set, sizes: dict) -> tuple[str, list, int, int, int]:
    """Walk tensor info i -> (name, its GGUF dims ne0 first, ggml type, data offset, data bytes)."""
    name = cur.text(f"the name of tensor #{i}", MAX_TENSOR_NAME_BYTES)
    if name in names:
        raise ValueError(f"tensor {name!r} appears twice")
    names.add(name)
    n_dims = cur.number("I", f"the dimension count of tensor {name!r}")
    if n_dims > MAX_DIMS:
        raise ValueError(f"tensor {name!r} has {n_dims} dimensions, over the limit of {MAX_DIMS}")
    dims = [cur.number("q", f"dimension {j} of tensor {name!r}") for j in range(n_dims)]  # ne0 first
    n = 1
    for j, ne in enumerate(dims):
        if ne < 0:
            raise ValueError(f"tensor {name!r} has a negative size {ne} in dimension {j}")
        n *= ne
    if n >= 1 << 63:
        raise ValueError(f"tensor {name!r} of GGUF shape {tuple(dims)} has {n} elements, over 2⁶³")
    gtype = cur.number("I", f"the type of tensor {name!r}")
    if gtype not in sizes:
        raise ValueError(f"tensor {name!r} has unknown ggml type {gtype}")
    block, type_bytes = sizes[gtype]
    if dims and dims[0] % block:
        raise ValueError(f"tensor {name!r} has rows of {dims[0]} numbers, not a multiple of its type's "
                         f"block of {block}")
    offset = cur.number("Q", f"the data offset of tensor {name!r}")
    return name, dims, gtype, offset, n // block * type_bytes


def check_header(cur: Cursor) -> tuple[int, int]:
    """Walk the header (magic, version, two counts bounded by the bytes left) -> (tensor count, key/value count)."""
    cur.need(HEADER_BYTES, "the header")
    if bytes(cur.buf[:4]) != b"GGUF":
        raise ValueError(f"not a GGUF file: it starts with {bytes(cur.buf[:4])!r}, not b'GGUF'")
    cur.pos = 4
    version = cur.number("I", "the version")
    if version & 0xFFFF == 0:  # written on a machine of the other byte order (llama.cpp's test)
        cur.endian, cur.pos = ">", 4
        version = cur.number("I", "the version")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (versions 2 and 3 are)")
    n_tensors = cur.number("Q", "the tensor count")
    n_kv = cur.number("Q", "the key/value count")
    for what, count, least, limit in (("key/value pairs", n_kv, MIN_KV_BYTES, MAX_KV),
                                      ("tensors", n_tensors, MIN_TENSOR_BYTES, MAX_TENSORS)):
        if count * least > cur.left:
            raise ValueError(f"truncated or corrupt: the header declares {count} {what} (at least "
                             f"{count * least} bytes), but only {cur.left} bytes remain")
        if count > limit:
            raise ValueError(f"the header declares {count} {what}, over the limit of {limit}")
    return n_tensors, n_kv


def check_layout(cur: Cursor, sizes: dict) -> tuple[dict, list, int]:
    """Walk header, key/values and tensor infos; each tensor's data must lie inside the file.
    -> ({key: (value type, element type or None, value)}, the tensor infos as check_tensor_info gives them,
    the offset of the data section)."""
    n_tensors, n_kv = check_header(cur)
    fields, budget, alignment = {}, [0], 32
    for i in range(n_kv):
        key = cur.text(f"key #{i}", MAX_KEY_BYTES)
        if key in fields:
            raise ValueError(f"metadata key {key!r} appears twice")
        vtype = cur.number("I", f"the value type of {key!r}")
        if key == "general.alignment" and vtype != UINT32:
            raise ValueError(f"general.alignment must be a UINT32, got value type {vtype}")
        fields[key] = (vtype, *check_value(cur, key, vtype, budget))
        if key == "general.alignment":
            alignment = fields[key][2]
            if alignment == 0 or alignment & (alignment - 1):
                raise ValueError(f"general.alignment must be a power of two, got {alignment}")
    names, infos = set(), []
    for i in range(n_tensors):
        infos.append(check_tensor_info(cur, i, names, sizes))
    start = -(-cur.pos // alignment) * alignment  # the data section begins at the next multiple of alignment
    for name, _, _, offset, n_bytes in infos:
        if start + offset + n_bytes > cur.size:
            raise ValueError(f"truncated or corrupt: tensor {name!r} needs bytes {start + offset} to "
                             f"{start + offset + n_bytes} of the file, but the file has {cur.size}")
    return fields, infos, start


@functools.cache
def block_sizes() -> dict:
    """ggml type code -> (numbers per block, bytes per block), as the gguf package lists them."""
    from gguf.constants import GGML_QUANT_SIZES

    return {int(t): bs for t, bs in GGML_QUANT_SIZES.items()}


@contextlib.contextmanager
def mapped(path):
    """A Cursor at the start of the GGUF file at `path`, mapped read-only for the with-block: checking and
    reading cost no more memory than the names and counts walked. A file shorter than the header is refused."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < HEADER_BYTES:  # mmap refuses an empty file; no GGUF file is this short
            head = f.read(HEADER_BYTES)
            if head[:4] != b"GGUF"[:len(head)]:
                raise ValueError(f"not a GGUF file: it starts with {head[:4]!r}, not b'GGUF'")
            raise ValueError(f"truncated or corrupt: the header needs {HEADER_BYTES} bytes, the file has {size}")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            yield Cursor(buf, size)


def check_gguf(path) -> None:
    """Refuse a GGUF file whose header does not fit its own size, with one line naming the key,
    tensor or count; return None for a file that can be read within bounded memory."""
    sizes = block_sizes()
    with mapped(path) as cur:
        check_layout(cur, sizes)


def scalar_value(path, key: str):
    """One scalar metadata value (an integer, a float or a bool) read without a gguf.GGUFReader: the key/values
    are walked as check_gguf walks them, with the same bounds, up to `key`. None when the file has no such key
    or holds a string or an array there. What a command checks a request against before loading the weights
    (SmolLM2's llama.context_length: under a millisecond, where reading the whole header takes 0.1 s)."""
    return scalar_values(path, (key,))[key]


def scalar_values(path, keys) -> dict:
    """{key: scalar_value(path, key)} for each of keys, in one walk of the key/values, which stops once all are
    found (a key that is missing walks them all)."""
    found = dict.fromkeys(keys)
    wanted = set(found)
    with mapped(path) as cur:
        _, n_kv = check_header(cur)
        budget = [0]
        for i in range(n_kv):
            if not wanted:
                break
            name = cur.text(f"key #{i}", MAX_KEY_BYTES)
            vtype = cur.number("I", f"the value type of {name!r}")
            if name in wanted and vtype in SCALAR_FORMATS:
                found[name] = cur.number(SCALAR_FORMATS[vtype], f"the value of {name!r}")
            else:
                check_value(cur, name, vtype, budget)
            wanted.discard(name)
    return found
