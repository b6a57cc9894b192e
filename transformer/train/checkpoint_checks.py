"""The refusals of checkpoint.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..backend import to_numpy
from ..require import require_int
from .shared_checks import is_checkpoint, param_dict, path_like


def numpy_value(o):  # json.dumps' default: NumPy scalars and arrays as Python numbers and lists
    if isinstance(o, (np.generic, np.ndarray)):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def non_str_key(name, x):  # -> "config['sizes'][3]" for the first key JSON would turn into a string, or None
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                return f"{name}[{k!r}]"
            found = non_str_key(f"{name}[{k!r}]", v)
            if found:
                return found
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            found = non_str_key(f"{name}[{i}]", v)
            if found:
                return found
    return None


def json_object(name, x):
    """A dict that JSON can hold: str keys, numbers, strings, lists, no NaN (NumPy values pass)."""
    if not isinstance(x, dict):
        raise TypeError(f"{name} must be a dict (saved as JSON), got {type(x).__name__}")
    key = non_str_key(name, x)
    if key:
        raise ValueError(f"{key}: JSON keys are strings, so this key would load back as a string; "
                         f"write it as one")
    try:
        json.dumps(x, allow_nan=False, default=numpy_value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} cannot be saved as JSON: {e}") from None


def save_checkpoint(dir, params, config, *, extra):
    path_like("dir", dir)
    d = Path(dir)
    if d.exists() and not d.is_dir():
        raise ValueError(f"{d} exists and is not a folder: a checkpoint is written into a folder")
    target = d / "checkpoint.npz"
    if target.is_symlink() or (target.exists() and not (target.is_file() and is_checkpoint(target))):
        raise ValueError(f"{target} exists and is not a checkpoint: refusing to overwrite it")
    param_dict("params", params)
    for k, p in params.items():
        if not k or "\x00" in k or k.startswith("/") or ".." in k.split("/"):
            raise ValueError(f"parameter name {k!r} cannot name a file inside the archive")
        if not bool(np.isfinite(to_numpy(p)).all()):
            raise ValueError(f"params[{k!r}] holds NaN or inf: refusing to save weights that cannot be loaded")
    for name, x in (("config", config), ("extra", {} if extra is None else extra)):
        json_object(name, x)


def load_checkpoint(path_or_dir, *, expected_shapes, max_bytes, xp):
    path_like("path_or_dir", path_or_dir)
    require_int(max_bytes=max_bytes, low=1)
    if expected_shapes is not None and not (isinstance(expected_shapes, dict) or callable(expected_shapes)):
        raise TypeError(f"expected_shapes must be a dict name -> shape or a function config -> that dict, "
                        f"got {type(expected_shapes).__name__}")


def checkpoint_extra(path_or_dir, *, max_bytes):
    path_like("path_or_dir", path_or_dir)
    require_int(max_bytes=max_bytes, low=1)


def checkpoint_contents(path_or_dir, *, max_bytes):
    checkpoint_extra(path_or_dir, max_bytes=max_bytes)


def write_metrics(dir, metrics):
    path_like("dir", dir)
    if Path(dir).exists() and not Path(dir).is_dir():
        raise ValueError(f"{dir} exists and is not a folder: metrics.json is written into a folder")
    json_object("metrics", metrics)


def read_metrics(path_or_dir):
    path_like("path_or_dir", path_or_dir)
