"""Checkpoints and metrics: the trained weights in one .npz, the run's numbers in one .json.

A checkpoint is DIR/checkpoint.npz, a plain NumPy archive (a zip of .npy files) that np.load
reads without pickle:

    params/NAME      one array per parameter, as trained (float32 or float64)
    meta/config      the model's config as a JSON string (a 0-d unicode array)
    meta/extra       caller's JSON (step, seed, …), "{}" if none
    meta/format      FORMAT_VERSION, an int64 scalar

A checkpoint is a file from elsewhere, so loading trusts nothing in it before it is checked:
the file's size first, then every member's .npy header (dtype and shape, read with
numpy.lib.format, no data) against the size the zip says the member has, and only then the
arrays; every weight finite; names and shapes against what the model expects (`check_params`).
Each problem is one line naming the file.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from . import checks
from ..backend import namespace, to_numpy
from ..require import checked_by

__all__ = ["FORMAT_VERSION", "CHECKPOINT_FILE", "METRICS_FILE", "MAX_CHECKPOINT_BYTES", "save_checkpoint",
           "load_checkpoint", "checkpoint_extra", "check_params", "write_metrics", "read_metrics"]

FORMAT_VERSION = 1
CHECKPOINT_FILE = "checkpoint.npz"
METRICS_FILE = "metrics.json"
MAX_CHECKPOINT_BYTES = 4 << 30  # 4 GiB: far above any model trained here, far below a bomb
MAX_METRICS_BYTES = 64 << 20  # 64 MiB of JSON is millions of steps
MAX_HEADER_BYTES = 10_000  # numpy's own default cap on a .npy header (a dict of dtype and shape)
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
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".npz", dir=out)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target


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


def read_members(path: Path, max_bytes: int) -> dict:  # -> name (without .npy) -> array
    """Every array of the archive, each header checked before any data is read."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes is over the cap max_bytes={max_bytes}")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:  # np.load would keep one of them, silently
                raise ValueError(f"{path}: member {twice[0]!r} appears more than once: corrupt or tampered")
            total = sum(i.file_size for i in infos)
            if total > max_bytes:
                raise ValueError(f"{path}: members unpack to {total} bytes, over the cap max_bytes={max_bytes}")
            for info in infos:
                member_header(z, info, path)
            with np.load(path, allow_pickle=False) as npz:  # headers checked: now read the data
                return {k: npz[k] for k in npz.files}
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a checkpoint: truncated, or not an .npz (zip) archive ({e})") from None
    except (EOFError, OSError) as e:
        raise ValueError(f"{path}: cannot read the archive: truncated or corrupt ({e})") from None


def meta_json(arrays: dict, key: str, path: Path) -> dict:
    """meta/config or meta/extra: a JSON object stored as a 0-d string."""
    a = arrays[key]
    if a.shape != () or a.dtype.kind != "U":
        raise ValueError(f"{path}: {key} must be a JSON string, got dtype {a.dtype}, shape {a.shape}")
    try:
        value = json.loads(str(a))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {key} is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: {key} must be a JSON object, got {type(value).__name__}")
    return value


def open_checkpoint(path_or_dir, max_bytes: int):  # -> (path, arrays, config)
    path = checkpoint_path(path_or_dir)
    if not path.is_file():
        where = f"no {CHECKPOINT_FILE} in {path.parent}" if Path(path_or_dir).is_dir() else f"{path}: no such file"
        raise FileNotFoundError(f"no checkpoint: {where}")
    arrays = read_members(path, max_bytes)
    missing = [k for k in META if k not in arrays]
    if missing:
        raise ValueError(f"{path}: not a checkpoint of this format: {missing[0]} is missing")
    fmt = arrays["meta/format"]
    if fmt.shape != () or fmt.dtype.kind not in "iu" or int(fmt) != FORMAT_VERSION:
        raise ValueError(f"{path}: unknown checkpoint format {fmt!r}: this version reads format {FORMAT_VERSION}")
    return path, arrays, meta_json(arrays, "meta/config", path)


@checked_by(checks.load_checkpoint)
def load_checkpoint(path_or_dir, *, expected_shapes=None, max_bytes: int = MAX_CHECKPOINT_BYTES,
                    xp=None) -> tuple:  # -> (params, config)
    """Read a checkpoint written by save_checkpoint: (params, config).

    path_or_dir: the .npz or the folder holding checkpoint.npz. expected_shapes: name -> shape,
    or a function config -> that dict (the model's own shapes for the config it was saved
    with); every parameter must be there, with that shape, and no other. xp: the arrays'
    namespace (None: NumPy). Refused, one line each (ValueError, FileNotFoundError): a file over
    max_bytes, a truncated file or a zip that is not an npz, a pickle inside, a member whose
    header declares more (or less) than it holds, a missing meta key, an unknown format
    version, a non-floating or non-finite weight, a missing, extra or misshapen parameter.
    """
    path, arrays, config = open_checkpoint(path_or_dir, max_bytes)
    params = {k.removeprefix("params/"): a for k, a in arrays.items() if k.startswith("params/")}
    extra = [k for k in arrays if k not in META and not k.startswith("params/")]
    if extra:
        raise ValueError(f"{path}: unexpected member {extra[0]!r} (neither params/… nor meta/…)")
    for k, a in params.items():
        if a.dtype.kind != "f":
            raise ValueError(f"{path}: parameter {k!r} must be floating point, got dtype {a.dtype}")
        if not np.isfinite(a).all():
            raise ValueError(f"{path}: parameter {k!r} holds NaN or inf ({int((~np.isfinite(a)).sum())} values)")
    if expected_shapes is not None:
        shapes = expected_shapes(config) if callable(expected_shapes) else expected_shapes
        check_params(params, shapes, source=str(path))
    xp = namespace(xp)
    return {k: xp.asarray(a) for k, a in params.items()}, config


@checked_by(checks.checkpoint_extra)
def checkpoint_extra(path_or_dir, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> dict:
    """The `extra` dict a checkpoint was saved with (step, seed, …), checked as load_checkpoint checks."""
    path, arrays, _ = open_checkpoint(path_or_dir, max_bytes)
    return meta_json(arrays, "meta/extra", path)


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
    missing = [k for k in expected_shapes if k not in params]
    if missing:
        raise ValueError(f"{source}: parameter {missing[0]!r} is missing ({len(missing)} missing)")
    unknown = [k for k in params if k not in expected_shapes]
    if unknown:
        raise ValueError(f"{source}: unexpected parameter {unknown[0]!r}: the config has no such weight")
    for k, want in expected_shapes.items():
        got = tuple(getattr(params[k], "shape", ()))
        if got != tuple(want):
            raise ValueError(f"{source}: parameter {k!r} has shape {got}, expected {tuple(want)}")


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
    target = out / METRICS_FILE
    target.write_text(text + "\n", encoding="utf-8")
    return target


@checked_by(checks.read_metrics)
def read_metrics(path_or_dir) -> dict:
    """Read metrics.json (or DIR/metrics.json) back as a dict."""
    p = Path(path_or_dir)
    p = p / METRICS_FILE if p.is_dir() else p
    if not p.is_file():
        raise FileNotFoundError(f"no metrics: {p}: no such file")
    if p.stat().st_size > MAX_METRICS_BYTES:
        raise ValueError(f"{p}: {p.stat().st_size} bytes is over the cap of {MAX_METRICS_BYTES}")
    try:
        value = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{p}: metrics must be a JSON object, got {type(value).__name__}")
    return value
