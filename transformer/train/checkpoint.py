"""Checkpoints and metrics: the trained weights in one .npz, the run's numbers in one .json.

A checkpoint is DIR/checkpoint.npz, a plain NumPy archive (a zip of .npy files) that np.load
reads without pickle:

    params/NAME      one array per parameter, as trained (float32 or float64)
    meta/config      the model's config as a JSON string (a 0-d unicode array)
    meta/extra       caller's JSON (step, seed, …), "{}" if none
    meta/format      FORMAT_VERSION, an int64 scalar

A checkpoint is a file from elsewhere, so loading trusts nothing in it before it is checked,
and allocates nothing a check has not bounded (as safetensors checks its header against the
file before any allocation, and numpy.load(allow_pickle=False) refuses pickles):

    1. the file's size, the number of members (MAX_MEMBERS), each name once (a set: linear);
    2. every member's size as the zip declares it, unpacked: the total under max_bytes, and a
       compressed member refused if it unpacks to more than MAX_RATIO times its packed bytes;
       the packed sizes together within the file (members may not share their bytes);
    3. every member's .npy header (dtype and shape, read with numpy.lib.format, no data) against
       that size; no Python objects (a pickle);
    4. the meta members (each under MAX_META_BYTES), the format version, the config's JSON;
    5. every parameter's dtype and shape against the shapes the config implies, from the headers;
    6. only then the data, into arrays of the shapes checked; every weight finite.

Each problem is one line naming the file. Files are written through `files.write_atomic`: a new
file beside the old one, renamed over it, never through a symbolic link.
"""
from __future__ import annotations

import json
import math
import struct
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from . import checkpoint_checks as checks
from ..backend import namespace, to_numpy
from ..files import write_atomic
from ..require import checked_by

__all__ = ["FORMAT_VERSION", "CHECKPOINT_FILE", "METRICS_FILE", "MAX_CHECKPOINT_BYTES", "save_checkpoint",
           "load_checkpoint", "checkpoint_contents", "checkpoint_extra", "check_params", "write_metrics",
           "read_metrics"]

FORMAT_VERSION = 1
CHECKPOINT_FILE = "checkpoint.npz"
METRICS_FILE = "metrics.json"
MAX_CHECKPOINT_BYTES = 4 << 30  # 4 GiB: far above any model trained here, far below a bomb
MAX_METRICS_BYTES = 64 << 20  # 64 MiB of JSON is millions of steps
MAX_HEADER_BYTES = 10_000  # numpy's own default cap on a .npy header (a dict of dtype and shape)
MAX_MEMBERS = 16_384  # a decoder of 1,800 layers (9 weights each); bounds the work of the checks per member
MAX_META_BYTES = 16 << 20  # the config, with a vocabulary, and extra are a few kB of JSON
# Deflate packs trained float weights by about 1.1×, a norm of ones or a zero bias by more but
# they are small; its ceiling is about 1032× (a run of one byte). A member over RATIO_FLOOR bytes
# that unpacks to over MAX_RATIO times its packed bytes is a zip bomb, not weights.
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20
META = ("meta/config", "meta/extra", "meta/format")


def checkpoint_path(path_or_dir) -> Path:
    """DIR -> DIR/checkpoint.npz; a file path stays as it is."""
    p = Path(path_or_dir)
    return p / CHECKPOINT_FILE if p.is_dir() else p


@checked_by(checks.save_checkpoint)
def save_checkpoint(dir, params: dict, config: dict, *, extra: dict | None = None) -> Path:
    """Write dir/checkpoint.npz (creating dir) and return its path.

    params: name -> float array (NumPy or CuPy; copied to the host), every value finite;
    config and extra: JSON-serialisable dicts. An existing checkpoint.npz is replaced only
    if it is a checkpoint; the new file is written beside it and renamed over it, so a crash
    mid-write leaves the old one whole.
    """
    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / CHECKPOINT_FILE
    arrays = {f"params/{k}": to_numpy(p) for k, p in params.items()}
    arrays["meta/config"] = np.array(json.dumps(plain(config)))  # 0-d unicode: no pickle
    arrays["meta/extra"] = np.array(json.dumps(plain(extra or {})))
    arrays["meta/format"] = np.array(FORMAT_VERSION, dtype=np.int64)
    return write_atomic(target, lambda f: np.savez(f, **arrays))


def member_header(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path):  # -> (shape, dtype)
    """Read one member's .npy header (magic, dtype, shape), never its data, and check that the
    data it declares is exactly what the zip holds after the header."""
    name = info.filename
    if not name.endswith(".npy"):
        raise ValueError(f"{path}: not a checkpoint: member {name!r} is not a .npy array")
    with z.open(info) as f:
        try:
            version = npy_format.read_magic(f)
            if version not in ((1, 0), (2, 0)):  # what np.save writes; 3.0 only for non-ASCII field names
                raise ValueError(f".npy format version {version} is not 1.0 or 2.0")
            read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            shape, fortran, dtype = read(f, max_header_size=MAX_HEADER_BYTES)
        except (ValueError, OSError, SyntaxError, zipfile.BadZipFile) as e:
            raise ValueError(f"{path}: member {name!r} has no valid .npy header ({e})") from None
        header_bytes = f.tell()
    if dtype.hasobject:
        raise ValueError(f"{path}: member {name!r} holds Python objects (dtype {dtype}): a pickle, refused")
    declared = math.prod(shape) * dtype.itemsize
    if header_bytes + declared != info.file_size:
        raise ValueError(f"{path}: member {name!r} declares shape {shape} ({declared} bytes of {dtype}) but holds "
                         f"{info.file_size - header_bytes} bytes: truncated or corrupt")
    return shape, dtype


def scan_members(z: zipfile.ZipFile, path: Path, size: int, max_bytes: int) -> dict:  # -> name -> (info, shape, dtype)
    """Every member's declared size and .npy header, checked before any data is read (steps 1–3)."""
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ValueError(f"{path}: {len(infos)} members, over the cap of {MAX_MEMBERS}: not a checkpoint")
    seen = set()
    for info in infos:  # np.load would keep one of two members of one name, silently
        if info.filename in seen:
            raise ValueError(f"{path}: member {info.filename!r} appears more than once: corrupt or tampered")
        seen.add(info.filename)
    total = sum(i.file_size for i in infos)
    if total > max_bytes:
        raise ValueError(f"{path}: members unpack to {total} bytes, over the cap max_bytes={max_bytes}")
    packed = sum(i.compress_size for i in infos)
    if packed > size:  # members that share their packed bytes: one compressed run unpacked many times over
        raise ValueError(f"{path}: the members' packed sizes add up to {packed} bytes, more than the file's {size}: "
                         "overlapping members (a zip bomb), not weights")
    for info in infos:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):  # what np.savez(_compressed) writes
            raise ValueError(f"{path}: member {info.filename!r} uses zip compression method {info.compress_type}: "
                             "a NumPy archive is stored or deflated")
        if info.file_size > max(RATIO_FLOOR, MAX_RATIO * info.compress_size):
            raise ValueError(f"{path}: member {info.filename!r} unpacks {info.compress_size} bytes to "
                             f"{info.file_size}, over {MAX_RATIO}× its packed size: a zip bomb, not weights")
    return {i.filename.removesuffix(".npy"): (i, *member_header(z, i, path)) for i in infos}


def declared_members(path: Path, size: int) -> int | None:
    """The member count the zip's end record declares, read from the file's tail before zipfile
    parses the central directory (which costs time and memory per member): the end of central
    directory record (APPNOTE 4.3.16), and for over 65,535 members its ZIP64 form (4.3.14)
    found through the locator just before it. None where there is no such record: zipfile says why."""
    with open(path, "rb") as f:
        f.seek(size - min(size, 22 + 0xFFFF))  # the record (22 bytes) and at most a 64 KiB comment
        tail = f.read()
        i = tail.rfind(b"PK\x05\x06")
        if i < 0 or len(tail) - i < 22:
            return None
        count = struct.unpack_from("<H", tail, i + 10)[0]  # entries in the central directory
        if count != 0xFFFF or i < 20 or tail[i - 20:i - 16] != b"PK\x06\x07":
            return count
        f.seek(struct.unpack_from("<Q", tail, i - 12)[0])  # the locator: where the ZIP64 record is
        record = f.read(40)
        return struct.unpack_from("<Q", record, 32)[0] if record[:4] == b"PK\x06\x06" and len(record) == 40 else None


def read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo):  # -> the array its checked header declares
    with z.open(info) as f:
        return npy_format.read_array(f, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)


def json_value(text: str, path, key: str | None = None):
    """json.loads, each problem one line naming the file (and the member `key`). JSON
    nested deeper than Python's recursion limit (about 1,000 levels; a config nests 3) is refused
    by the decoder itself with a RecursionError: named here, as any other bad JSON. NaN and Infinity,
    which Python's json reads but strict JSON has not, are refused, as the writers refuse them."""
    def no_constant(name):
        raise ValueError(f"{path}: {key + ' holds' if key else 'holds'} {name}, which is not a JSON number "
                         "(the package writes strict JSON)")
    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {key + ' is ' if key else ''}not valid JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"{path}: {key or 'the file'} nests JSON deeper than Python's recursion limit "
                         f"({sys.getrecursionlimit()}): not a config or metrics") from None


def open_checkpoint(path_or_dir, max_bytes: int, expected_shapes=None, read_params=True):
    # -> (path, config, extra, params or None)
    """Steps 1–6 of the module's docstring in one pass over the archive; the parameters' data is
    read only when read_params (load_checkpoint), after every header agreed with the config."""
    path = checkpoint_path(path_or_dir)
    if not path.is_file():
        where = (f"{path} is a directory, not a checkpoint file" if path.is_dir() else
                 f"no {CHECKPOINT_FILE} in {path.parent}" if Path(path_or_dir).is_dir() else
                 f"{path}: not a regular file" if path.exists() else f"{path}: no such file")  # /dev/zero exists
        raise FileNotFoundError(f"no checkpoint: {where}")
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes is over the cap max_bytes={max_bytes}")
    try:
        count = declared_members(path, size)
        if count is not None and count > MAX_MEMBERS:  # before zipfile lists them (scan_members counts again)
            raise ValueError(f"{path}: {count} members, over the cap of {MAX_MEMBERS}: not a checkpoint")
        with zipfile.ZipFile(path) as z:
            members = scan_members(z, path, size, max_bytes)
            config, extra = read_meta(z, members, path)
            shapes = param_headers(members, path)
            if expected_shapes is not None:  # from the headers: no weight is read before its shape agrees
                want = expected_shapes(config) if callable(expected_shapes) else expected_shapes
                check_shapes(shapes, want, str(path))
            if not read_params:
                return path, config, extra, shapes
            params = {}
            for k in shapes:
                params[k] = a = read_member(z, members[f"params/{k}"][0])
                if not np.isfinite(a).all():
                    raise ValueError(f"{path}: parameter {k!r} holds NaN or inf ({int((~np.isfinite(a)).sum())} "
                                     "values)")
            return path, config, extra, params
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a checkpoint: truncated, or not an .npz (zip) archive ({e})") from None
    except (EOFError, OSError, zlib.error) as e:
        raise ValueError(f"{path}: cannot read the archive: truncated or corrupt ({e})") from None


def read_meta(z, members: dict, path: Path):  # -> (config, extra): the JSON objects of meta/config, meta/extra
    missing = [k for k in META if k not in members]
    if missing:
        raise ValueError(f"{path}: not a checkpoint of this format: {missing[0]} is missing")
    info, shape, dtype = members["meta/format"]
    if shape != () or dtype.kind not in "iu":
        raise ValueError(f"{path}: unknown checkpoint format (dtype {dtype}, shape {shape}): this version reads "
                         f"format {FORMAT_VERSION}")
    fmt = int(read_member(z, info))
    if fmt != FORMAT_VERSION:
        raise ValueError(f"{path}: unknown checkpoint format {fmt}: this version reads format {FORMAT_VERSION}")
    unknown = [k for k in members if k not in META and not k.startswith("params/")]
    if unknown:
        raise ValueError(f"{path}: unexpected member {unknown[0]!r} (neither params/… nor meta/…)")
    values = []
    for key in ("meta/config", "meta/extra"):
        info, shape, dtype = members[key]
        if shape != () or dtype.kind != "U":
            raise ValueError(f"{path}: {key} must be a JSON string, got dtype {dtype}, shape {shape}")
        if info.file_size > MAX_META_BYTES:
            raise ValueError(f"{path}: {key} is {info.file_size} bytes, over the cap of {MAX_META_BYTES}")
        value = json_value(str(read_member(z, info)), path, key)
        if not isinstance(value, dict):
            raise ValueError(f"{path}: {key} must be a JSON object, got {type(value).__name__}")
        values.append(value)
    return tuple(values)


def param_headers(members: dict, path: Path) -> dict:  # -> parameter name -> shape, every dtype floating
    shapes = {}
    for k, (_, shape, dtype) in members.items():
        if k.startswith("params/"):
            if dtype.kind != "f":
                raise ValueError(f"{path}: parameter {k.removeprefix('params/')!r} must be floating point, "
                                 f"got dtype {dtype}")
            shapes[k.removeprefix("params/")] = shape
    return shapes


@checked_by(checks.load_checkpoint)
def load_checkpoint(path_or_dir, *, expected_shapes=None, max_bytes: int = MAX_CHECKPOINT_BYTES,
                    xp=None) -> tuple:  # -> (params, config)
    """Read a checkpoint written by save_checkpoint: (params, config).

    path_or_dir: the .npz or the folder holding checkpoint.npz. expected_shapes: name -> shape,
    or a function config -> that dict (the model's own shapes for the config it was saved
    with); every parameter must be there, with that shape, and no other; compared with the
    members' headers before any weight is read. xp: the arrays' namespace (None: NumPy).
    Refused, one line each (ValueError, FileNotFoundError): a file over max_bytes, more than
    MAX_MEMBERS members or one name twice, members unpacking to more than max_bytes or a member
    to over MAX_RATIO times its packed size, a truncated file or a zip that is not an npz, a
    pickle inside, a member whose header declares more (or less) than it holds, a missing meta
    key, an unknown format version, JSON nested too deep to parse, a non-floating or
    non-finite weight, a missing, extra or misshapen parameter.
    """
    path, config, _, params = open_checkpoint(path_or_dir, max_bytes, expected_shapes)
    xp = namespace(xp)
    return {k: xp.asarray(a) for k, a in params.items()}, config


@checked_by(checks.checkpoint_contents)
def checkpoint_contents(path_or_dir, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> tuple:  # -> (config, shapes)
    """The config a checkpoint was saved with and its parameters' shapes (name -> shape), read
    from the headers without reading any weight: what a loader bounds a config's sizes by
    before it builds anything from them. Checked as load_checkpoint checks the file."""
    _, config, _, shapes = open_checkpoint(path_or_dir, max_bytes, read_params=False)
    return config, shapes


@checked_by(checks.checkpoint_extra)
def checkpoint_extra(path_or_dir, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> dict:
    """The `extra` dict a checkpoint was saved with (step, seed, …), checked as load_checkpoint checks."""
    return open_checkpoint(path_or_dir, max_bytes, read_params=False)[2]


def check_params(params: dict, expected_shapes: dict, *, source: str = "params") -> None:
    """Raise one ValueError line unless params has exactly the expected names, each of the
    expected shape (a model's loader calls it with the shapes its config implies).

    >>> check_params({"W": np.ones((2, 3))}, {"W": (2, 3)})
    >>> check_params({"W": np.ones((2, 3))}, {"W": (3, 2)})
    Traceback (most recent call last):
    ValueError: params: parameter 'W' has shape (2, 3), expected (3, 2)
    """
    if not isinstance(params, dict) or not isinstance(expected_shapes, dict):
        raise TypeError(f"{source}: params and expected_shapes must be dicts, got {type(params).__name__} "
                        f"and {type(expected_shapes).__name__}")
    check_shapes({k: tuple(getattr(p, "shape", ())) for k, p in params.items()}, expected_shapes, source)


def check_shapes(shapes: dict, expected_shapes: dict, source: str) -> None:  # name -> shape, both
    missing = [k for k in expected_shapes if k not in shapes]
    if missing:
        raise ValueError(f"{source}: parameter {missing[0]!r} is missing ({len(missing)} missing)")
    unknown = [k for k in shapes if k not in expected_shapes]
    if unknown:
        raise ValueError(f"{source}: unexpected parameter {unknown[0]!r}: the config has no such weight")
    for k, want in expected_shapes.items():
        if tuple(shapes[k]) != tuple(want):
            raise ValueError(f"{source}: parameter {k!r} has shape {tuple(shapes[k])}, expected {tuple(want)}")


def plain(value):
    """NumPy scalars and arrays as Python numbers and lists, for JSON."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


@checked_by(checks.write_metrics)
def write_metrics(dir, metrics: dict) -> Path:
    """Write dir/metrics.json (creating dir): loss and lr per step, tokens/s, held-out accuracy,
    seed, steps, config — whatever the run records, as strict JSON (NaN refused)."""
    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(plain(metrics), indent=1)  # checked at the door: JSON, no NaN
    return write_atomic(out / METRICS_FILE, lambda f: f.write((text + "\n").encode("utf-8")))


@checked_by(checks.read_metrics)
def read_metrics(path_or_dir) -> dict:
    """Read metrics.json (or DIR/metrics.json) back as a dict."""
    p = Path(path_or_dir)
    p = p / METRICS_FILE if p.is_dir() else p
    if not p.is_file():
        raise FileNotFoundError(f"no metrics: {p}: {'not a regular file' if p.exists() else 'no such file'}")
    if p.stat().st_size > MAX_METRICS_BYTES:
        raise ValueError(f"{p}: {p.stat().st_size} bytes is over the cap of {MAX_METRICS_BYTES}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None
    value = json_value(text, p)
    if not isinstance(value, dict):
        raise ValueError(f"{p}: metrics must be a JSON object, got {type(value).__name__}")
    return value
