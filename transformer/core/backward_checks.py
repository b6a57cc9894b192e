"""The refusals of the core's training functions: `linear`, every `*_backward`, and the loss.

A backward pass multiplies and sums arrays whose shapes must agree exactly: a gradient dY of the
wrong shape would often broadcast, or reshape into the right number of rows, and give a wrong
gradient in silence. These checks name the bad shape first. One check per public function, of
the same name, as in `checks.py` (whose shared pieces they reuse).
"""
from __future__ import annotations

from . import checks
from ..backend import get_xp
from ..require import require_array, require_bool, require_float, require_int


def same_shape(name, t, like_name, like):
    """t is a floating-point array of exactly `like`'s shape (a gradient and what it is of)."""
    require_float(name, t)
    if tuple(t.shape) != tuple(like.shape):
        raise ValueError(f"{name} must have the shape of {like_name} {tuple(like.shape)}, got {tuple(t.shape)}")


def matrix(name, W, rows):
    """W is a (d_in, d_out) matrix whose d_in matches x's last size."""
    require_float(name, W)
    if W.ndim != 2 or W.shape[0] != rows:
        raise ValueError(f"{name} must be a (d_in, d_out) matrix with d_in = {rows} (x's last size), "
                         f"got shape {tuple(W.shape)}")


def output_gradient(dY, x, d_out):
    """dY has the shape of the output: x's leading axes and d_out features."""
    require_float("dY", dY)
    want = (*x.shape[:-1], d_out)
    if tuple(dY.shape) != want:
        raise ValueError(f"dY must have shape (..., d_out) = {want} for x {tuple(x.shape)}, got {tuple(dY.shape)}")


# --- layers.py ------------------------------------------------------------------------------
def linear(x, W, b):
    require_float("x", x)
    matrix("W", W, x.shape[-1] if x.ndim else 0)
    if b is not None:
        require_float("b", b)
        if tuple(b.shape) != (W.shape[1],):
            raise ValueError(f"b must have shape (d_out,) = ({W.shape[1]},), got {tuple(b.shape)}")


def linear_backward(dY, x, W, has_bias):
    require_float("x", x)
    matrix("W", W, x.shape[-1] if x.ndim else 0)
    output_gradient(dY, x, W.shape[1])
    require_bool(has_bias=has_bias)


def layer_norm_backward(dY, x, gamma, eps, has_beta):
    checks.norm_input(x, eps, gamma=gamma)
    same_shape("dY", dY, "x", x)
    require_bool(has_beta=has_beta)


def rms_norm_backward(dY, x, gamma, eps):
    checks.norm_input(x, eps, gamma=gamma)
    same_shape("dY", dY, "x", x)


def relu_backward(dY, x):
    require_float("x", x)
    same_shape("dY", dY, "x", x)


def sigmoid_backward(dY, x):
    relu_backward(dY, x)


def silu_backward(dY, x):
    relu_backward(dY, x)


def gelu_backward(dY, x, approximate):
    relu_backward(dY, x)
    checks.gelu(x, approximate)


def ffn_backward(dY, x, W1, W2, b1, b2, activation):
    checks.ffn_shapes(x, ("W2", W2), b1, b2, W1=W1)
    if activation not in ("relu", "gelu", "gelu_tanh", "silu"):
        raise ValueError(f"activation must be 'relu', 'gelu', 'gelu_tanh' or 'silu', got {activation!r}")
    output_gradient(dY, x, W2.shape[1])


def swiglu_ffn_backward(dY, x, W_gate, W_up, W_down):
    checks.ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)
    output_gradient(dY, x, W_down.shape[1])


# --- embedding.py ---------------------------------------------------------------------------
def embed_backward(dX, ids, v):
    require_int(v=v, low=1)
    require_float("dX", dX)
    require_array("ids", ids)
    if dX.ndim < 1 or tuple(dX.shape[:-1]) != tuple(ids.shape):
        raise ValueError(f"dX must have shape (*ids.shape, d) = {(*ids.shape, 'd')}, got {tuple(dX.shape)}")
    checks.embed(ids, get_xp(dX).zeros((v, 0), dtype=dX.dtype))  # the ids' dtype and range, against an empty (v, 0) table


def lm_head_backward(d_logits, x, W_E):
    checks.lm_head(x, W_E, W_out=None)
    require_float("d_logits", d_logits)
    want = (*x.shape[:-1], W_E.shape[0])
    if tuple(d_logits.shape) != want:
        raise ValueError(f"d_logits must have shape (..., v) = {want}, got {tuple(d_logits.shape)}")


# --- positions.py ---------------------------------------------------------------------------
def learned_positions_backward(dP, n_pos, offset):
    require_float("dP", dP)
    if dP.ndim < 2:
        raise ValueError(f"dP must be (..., n, d), got shape {tuple(dP.shape)}")
    require_int(n_pos=n_pos, offset=offset)
    if offset + dP.shape[-2] > n_pos:
        raise ValueError(f"positions {offset}…{offset + dP.shape[-2] - 1} exceed the table's {n_pos} rows")


def apply_rope_interleaved_backward(dY, cos, sin):
    checks.apply_rope_interleaved(dY, cos, sin)


def apply_rope_half_backward(dY, cos, sin):
    checks.apply_rope_half(dY, cos, sin)


# --- attention.py ---------------------------------------------------------------------------
def softmax_backward(dP, P):
    require_float("P", P)
    same_shape("dP", dP, "P", P)


def repeat_kv_backward(dX, n_rep):
    require_float("dX", dX)
    require_int(n_rep=n_rep, low=1)
    if dX.ndim != 4 or dX.shape[1] % n_rep:
        raise ValueError(f"dX must be (b, h_kv·n_rep, n, d_h) with heads a multiple of n_rep={n_rep}, "
                         f"got shape {tuple(dX.shape)}")


def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale):
    checks.attention_shapes(q, k, v, None)
    checks.optional_scale(scale)
    same_shape("dO", dO, "q", q)
    require_float("P", P)
    want = (*q.shape[:3], k.shape[2])
    if tuple(P.shape) != want:
        raise ValueError(f"P must be the saved weights of shape (b, h, n_q, n_k) = {want}, got {tuple(P.shape)}")


def dropout_backward(dY, mask, p):
    require_float("dY", dY)
    checks.dropout_p(p)
    if mask is not None:
        checks.keep_mask(mask, dY, "dY")


# --- heads.py -------------------------------------------------------------------------------
def split_heads_backward(dX):
    checks.merge_heads(dX)


def merge_heads_backward(dY, h):
    checks.split_heads(dY, h)


# --- loss.py --------------------------------------------------------------------------------
def cross_entropy(logits, targets, *, ignore_index):
    require_float("logits", logits)
    require_array("targets", targets)
    require_int(ignore_index=ignore_index, low=None)
    xp = get_xp(logits, targets)
    if not xp.isdtype(targets.dtype, "integral"):
        raise TypeError(f"targets must be integer token ids, got dtype {targets.dtype}")
    if logits.ndim < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must be (..., v) with v ≥ 1, got shape {tuple(logits.shape)}")
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"targets must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
                         f"got {tuple(targets.shape)}")
    v = logits.shape[-1]
    bad = (targets != ignore_index) & ((targets < 0) | (targets >= v))
    if bool(xp.any(bad)):  # one device -> host transfer: a bad target would index out of the row
        raise ValueError(f"targets must lie in [0, {v}) or equal ignore_index={ignore_index}, "
                         f"got min {int(xp.min(targets))}, max {int(xp.max(targets))}")


def cross_entropy_backward(logits, targets, *, ignore_index):
    cross_entropy(logits, targets, ignore_index=ignore_index)
