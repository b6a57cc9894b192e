"""The refusals of train/'s public functions, one check per function and of the same name.

Each receives every argument of its function by keyword, the function's defaults filled in (it states
none), and raises a one-line error naming the bad value, or returns None. The shared pieces (a
parameter dict, a seed, a generator, a split) come first; then one section per module: optim, data,
translation_data, checkpoint, loop.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..core.packing_checks import documents, documents_fit
from ..backend import to_numpy
from ..files import check_writable_folder
from ..require import require_bool, require_float, require_int, require_real

SPLITS = ("train", "heldout")


# --- shared pieces --------------------------------------------------------------------------
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


def grads_match(params, grads):
    """What a model's loss_and_grads returned: the params' keys and shapes."""
    same_arrays("grads", grads, params)


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


# --- optim.py -------------------------------------------------------------------------------
def adamw_state(params):
    param_dict("params", params)


def optimizer_settings(lr, betas, eps, weight_decay, decay):
    require_real(lr=lr, eps=eps, weight_decay=weight_decay)
    for name, x in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
        if x < 0:
            raise ValueError(f"{name} must be ≥ 0, got {name}={x!r}")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (β₁, β₂), got betas={betas!r}")
    require_real(**{"betas[0]": betas[0], "betas[1]": betas[1]})
    if not all(0 <= b < 1 for b in betas):
        raise ValueError(f"betas must lie in [0, 1), got betas={tuple(betas)}")
    callable_arg("decay", decay, optional=True)


def adamw_step(params, grads, state, lr, *, betas, eps, weight_decay, decay):
    param_dict("params", params)
    same_arrays("grads", grads, params)
    if not (hasattr(state, "m") and hasattr(state, "v") and hasattr(state, "t")):
        raise TypeError(f"state must be an AdamWState (adamw_state(params)), got {type(state).__name__}")
    same_arrays("state.m", state.m, params)
    same_arrays("state.v", state.v, params)
    optimizer_settings(lr, betas, eps, weight_decay, decay)


def lr_at(step, *, lr_max, warmup, total, lr_min):
    require_int(step=step, warmup=warmup, total=total)
    require_real(lr_max=lr_max, lr_min=lr_min)
    if lr_max < 0 or not 0 <= lr_min <= lr_max:
        raise ValueError(f"need 0 ≤ lr_min ≤ lr_max, got lr_min={lr_min!r}, lr_max={lr_max!r}")
    if total < warmup or total == 0:
        raise ValueError(f"total must be ≥ warmup and ≥ 1, got total={total}, warmup={warmup}")


def global_norm(grads):
    param_dict("grads", grads)


def clip_by_global_norm(grads, max_norm):
    param_dict("grads", grads)
    require_real(max_norm=max_norm, positive=True)


# --- data.py --------------------------------------------------------------------------------
def token_range(v, first_token):
    require_int(v=v, low=1)
    require_int(first_token=first_token)
    if first_token >= v:
        raise ValueError(f"first_token={first_token} leaves no token below v={v} to draw")


def induction_batch(rng, b, n_half, v, *, first_token, distinct, split):
    generator(rng)
    require_int(b=b, n_half=n_half, low=1)
    token_range(v, first_token)
    require_bool(distinct=distinct)
    split_name(split)
    if distinct and n_half > v - first_token:
        raise ValueError(f"n_half={n_half} distinct tokens need v − first_token ≥ n_half, got {v} − {first_token}; "
                         f"raise v or pass distinct=False")


def induction_split(seed, n_train_batches, n_heldout_batches, b, n_half, v, *, first_token, distinct):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    induction_batch(np.random.default_rng(0), b, n_half, v, first_token=first_token, distinct=distinct, split="train")


def induction_accuracy(pred_ids, ids):
    for name, x in (("pred_ids", pred_ids), ("ids", ids)):
        a = np.asarray(x)
        if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must be integer ids (b, 2·n_half), got dtype {a.dtype}, shape {a.shape}")
    if np.shape(pred_ids) != np.shape(ids):
        raise ValueError(f"pred_ids {np.shape(pred_ids)} and ids {np.shape(ids)} must have one shape")
    if np.shape(ids)[1] < 4 or np.shape(ids)[1] % 2:
        raise ValueError(f"ids must hold two equal halves of ≥ 2 tokens, got length {np.shape(ids)[1]}")


def induction_documents(rng, count, v, n_half_range, *, first_token, distinct, split):
    require_int(count=count, low=1)
    int_range("n_half_range", n_half_range, low=1)
    induction_batch(rng, 1, n_half_range[1], v, first_token=first_token, distinct=distinct, split=split)


def doc_list(docs, score_from, pad_id):
    documents(docs)
    if len(docs) == 0:
        raise ValueError("docs is empty: no document to lay out")
    require_int(pad_id=pad_id, low=None)
    if score_from is not None:
        if not hasattr(score_from, "__len__") or len(score_from) != len(docs):
            raise ValueError(f"score_from must give one position per document ({len(docs)}), got {score_from!r}")
        require_int(**{f"score_from[{i}]": s for i, s in enumerate(score_from)})


def padded_rows(docs, n, *, score_from, pad_id):
    doc_list(docs, score_from, pad_id)
    require_int(n=n, low=1)
    documents_fit([len(np.asarray(d)) for d in docs], n)


def packed_rows(docs, n_ctx, *, score_from, pad_id, longest_first):
    doc_list(docs, score_from, pad_id)
    require_int(n_ctx=n_ctx, low=1)
    require_bool(longest_first=longest_first)
    documents_fit([len(np.asarray(d)) for d in docs], n_ctx)


def batches(make_batch, seed, steps):
    callable_arg("make_batch", make_batch)
    require_int(seed=seed, steps=steps)


# --- translation_data.py --------------------------------------------------------------------
def translation_batch(rng, b, *, n_range, split):
    generator(rng)
    require_int(b=b, low=1)
    int_range("n_range", n_range, low=1)
    split_name(split)


def translation_split(seed, n_train_batches, n_heldout_batches, b, *, n_range):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    translation_batch(np.random.default_rng(0), b, n_range=n_range, split="train")


def translation_alignment(n_src):
    require_int(n_src=n_src, low=1)


def token_ids(ids, vocab):
    a = np.asarray(ids)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"ids must be a 1-D sequence of integer ids, got dtype {a.dtype}, shape {a.shape}")
    v = 51 if vocab is None else vocab.v  # translation_vocab().v
    bad = a[(a != -100) & ((a < 0) | (a >= v))]
    if bad.size:
        raise ValueError(f"token ids must lie in [0, {v}) (or be -100), got {int(bad[0])}")


def detokenize(ids, vocab):
    token_ids(ids, vocab)


def reference_translation(src, vocab=None):
    token_ids(src, vocab)


# --- checkpoint.py --------------------------------------------------------------------------
def is_checkpoint(path) -> bool:
    """Whether a file is a zip holding meta/format.npy: one save_checkpoint wrote (safe to replace)."""
    try:
        with zipfile.ZipFile(path) as z:
            return "meta/format.npy" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def numpy_value(o):  # json.dumps' default: NumPy scalars and arrays as Python numbers and lists
    if isinstance(o, (np.generic, np.ndarray)):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def json_object(name, x):
    """A dict that JSON can hold: str keys, numbers, strings, lists, no NaN (NumPy values pass)."""
    if not isinstance(x, dict):
        raise TypeError(f"{name} must be a dict (saved as JSON), got {type(x).__name__}")
    try:
        json.dumps(x, allow_nan=False, default=numpy_value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} cannot be saved as JSON: {e}") from None


def path_like(name, p):
    if not isinstance(p, (str, Path)) or str(p) == "":
        raise TypeError(f"{name} must be a path (str or Path), got {name}={p!r}")


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


def write_metrics(dir, metrics):
    path_like("dir", dir)
    if Path(dir).exists() and not Path(dir).is_dir():
        raise ValueError(f"{dir} exists and is not a folder: metrics.json is written into a folder")
    json_object("metrics", metrics)


def read_metrics(path_or_dir):
    path_like("path_or_dir", path_or_dir)


# --- loop.py --------------------------------------------------------------------------------
def train_loop(loss_and_grads, params, batch_iter, *, steps, lr_max, warmup, min_lr, clip, weight_decay, betas, eps,
               decay, progress, on_step, desc, tokens_of):
    callable_arg("loss_and_grads", loss_and_grads)
    param_dict("params", params)
    if not hasattr(batch_iter, "__iter__") and not hasattr(batch_iter, "__next__"):
        raise TypeError(f"batch_iter must be an iterator of batches (T.batches(...)), got {type(batch_iter).__name__}")
    require_int(steps=steps, low=1)
    lr_at(0, lr_max=lr_max, warmup=warmup, total=steps, lr_min=min_lr)
    if clip is not None:
        require_real(clip=clip, positive=True)
    optimizer_settings(lr_max, betas, eps, weight_decay, decay)
    require_bool(progress=progress)
    callable_arg("on_step", on_step, optional=True)
    callable_arg("tokens_of", tokens_of, optional=True)
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a string, got {desc!r}")

