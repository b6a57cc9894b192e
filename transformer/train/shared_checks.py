"""Pieces of train/'s refusals that several check modules share: a parameter dict, arrays of its
shapes, a generator, a split, an integer range, a function argument, a path, and the output folder of
a training run (with the test of a file a checkpoint: what save_checkpoint may replace)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..files import check_writable_folder
from ..require import require_float, require_int


SPLITS = ("train", "heldout")


def param_dict(name: str, params):
    """A non-empty dict: str name -> floating-point array."""
    if not isinstance(params, dict):
        raise TypeError(f"{name} must be a dict of name -> array, got {type(params).__name__}")
    if not params:
        raise ValueError(f"{name} is empty: nothing to train")
    for k, p in params.items():
        if not isinstance(k, str):
            raise TypeError(f"{name} keys must be strings, got {k!r}")
        require_float(f"{name}[{k!r}]", p)


def same_arrays(name: str, arrays, params):
    """arrays has exactly params' keys, each of its parameter's shape (gradients, moments)."""
    param_dict(name, arrays)
    missing, unknown = sorted(set(params) - set(arrays)), sorted(set(arrays) - set(params))
    if missing or unknown:
        raise ValueError(f"keys of {name} ≠ keys of params: missing {missing}, unexpected {unknown}")
    for k, p in params.items():
        if tuple(arrays[k].shape) != tuple(p.shape):
            raise ValueError(f"{name}[{k!r}] has shape {tuple(arrays[k].shape)}, params[{k!r}] {tuple(p.shape)}")


def generator(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a np.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")


def split_name(split):
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'heldout', got split={split!r}")


def int_range(name: str, r, low: int):
    """(lo, hi) integers with low ≤ lo ≤ hi, both ends included."""
    if not isinstance(r, (tuple, list)) or len(r) != 2:
        raise TypeError(f"{name} must be a pair (lo, hi), got {name}={r!r}")
    require_int(**{f"{name}[0]": r[0], f"{name}[1]": r[1]}, low=low)
    if r[0] > r[1]:
        raise ValueError(f"{name} must have lo ≤ hi, got {name}={tuple(r)}")


def callable_arg(name: str, f, optional: bool = False):
    if not (callable(f) or (optional and f is None)):
        raise TypeError(f"{name} must be a function{' or None' if optional else ''}, got {name}={f!r}")


def path_like(name, p):
    if not isinstance(p, (str, Path)) or str(p) == "":
        raise TypeError(f"{name} must be a path (str or Path), got {name}={p!r}")


def is_checkpoint(path) -> bool:
    """Whether a file is a zip holding meta/format.npy: one save_checkpoint wrote (safe to replace)."""
    try:
        with zipfile.ZipFile(path) as z:
            return "meta/format.npy" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def output_folder(out) -> None:
    """Refuse, before any training, a folder that cannot receive checkpoint.npz and metrics.json:
    not a folder, not creatable or not writable (a probe file is written and removed), either
    name a symbolic link or a folder, or a checkpoint.npz that save_checkpoint would not replace.
    The folder is created if it is missing."""
    path_like("out", out)
    folder = check_writable_folder(out, ("checkpoint.npz", "metrics.json"))
    target = folder / "checkpoint.npz"
    if target.exists() and not is_checkpoint(target):
        raise ValueError(f"{target} exists and is not a checkpoint: refusing to overwrite it")
