"""The refusals of `core/layers.py`, one check per public function and of the same name; the
elementwise activations refuse only what is no array, their backward passes check the gradient's shape."""
from __future__ import annotations

from ..require import require_array, require_bool, require_float, require_real, require_vector
from .shared_checks import same_shape


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


def norm_input(x, eps, **params):
    """x floating-point (an integer x would come back rounded to integers), γ and β of shape (d,)."""
    require_float("x", x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must be (..., d) with d ≥ 1, got shape {tuple(x.shape)}")
    for name, p in params.items():
        if p is not None or name == "gamma":  # β may be absent, γ may not: None * x failed inside
            require_vector(name, p, x.shape[-1], "d")
    require_real(eps=eps)
    if eps < 0:
        raise ValueError(f"eps must be ≥ 0, got eps={eps}")


def layer_norm(x, gamma, beta, eps):
    norm_input(x, eps, gamma=gamma, beta=beta)


def rms_norm(x, gamma, eps):
    norm_input(x, eps, gamma=gamma)


def layer_norm_backward(dY, x, gamma, eps, has_beta):
    norm_input(x, eps, gamma=gamma)
    same_shape("dY", dY, "x", x)
    require_bool(has_beta=has_beta)


def rms_norm_backward(dY, x, gamma, eps):
    norm_input(x, eps, gamma=gamma)
    same_shape("dY", dY, "x", x)


def relu(x):
    require_array("x", x)  # a list: "list is not a supported array type", naming no argument


def sigmoid(x):
    relu(x)


def silu(x):
    relu(x)


def erf(x):
    relu(x)


def relu_backward(dY, x):
    require_float("x", x)
    same_shape("dY", dY, "x", x)


def sigmoid_backward(dY, x):
    relu_backward(dY, x)


def silu_backward(dY, x):
    relu_backward(dY, x)


def gelu(x, approximate):
    relu(x)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu_backward(dY, x, approximate):
    relu_backward(dY, x)
    gelu(x, approximate)


def ffn_shapes(x, down, b1=None, b2=None, **W_in):  # down: (name, (d_ff, d_out) matrix)
    """Shapes named before any matmul: each W_in (d, d_ff), the down projection (d_ff, d_out)."""
    require_float("x", x)
    for name, W in W_in.items():
        require_float(name, W)
        if W.ndim != 2:  # a 0-d W1 failed on its shape[-1], an IndexError
            raise ValueError(f"{name} must be a (d, d_ff) matrix, got shape {tuple(W.shape)}")
    d = x.shape[-1] if x.ndim else 0
    d_ff = next(iter(W_in.values())).shape[-1]
    for name, W in W_in.items():
        if tuple(W.shape) != (d, d_ff):
            raise ValueError(f"{name} must be (d, d_ff) = ({d}, {d_ff}) for x of shape {tuple(x.shape)}, "
                             f"got {tuple(W.shape)}")
    name, W = down
    require_float(name, W)
    if W.ndim != 2 or W.shape[0] != d_ff:
        raise ValueError(f"{name} must be (d_ff, d) with d_ff = {d_ff}, got shape {tuple(W.shape)}")
    for b_name, b, size in (("b1", b1, d_ff), ("b2", b2, W.shape[1])):
        if b is not None:
            require_vector(b_name, b, size)


ACTIVATION_NAMES = ("relu", "gelu", "gelu_tanh", "silu")


def activation_name(activation):
    if activation not in ACTIVATION_NAMES:
        raise ValueError(f"activation must be 'relu', 'gelu', 'gelu_tanh' or 'silu', got {activation!r}")


def ffn(x, W1, W2, b1, b2, activation):
    ffn_shapes(x, ("W2", W2), b1, b2, W1=W1)
    if isinstance(activation, str):
        activation_name(activation)
    elif not callable(activation):
        raise TypeError(f"activation must be a function (T.relu, T.gelu, …) or its name, got {activation!r}")


def ffn_backward(dY, x, W1, W2, b1, b2, activation):
    ffn_shapes(x, ("W2", W2), b1, b2, W1=W1)
    activation_name(activation)
    output_gradient(dY, x, W2.shape[1])


def glu_ffn(x, W_gate, W_up, W_down, activation):
    ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)
    if not callable(activation):  # ffn takes a name, the gate's σ is a function: "silu" was called
        raise TypeError(f"activation must be a function (T.sigmoid, T.silu, …), got {activation!r:.40}")


def swiglu_ffn(x, W_gate, W_up, W_down):
    ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)


def swiglu_ffn_backward(dY, x, W_gate, W_up, W_down):
    ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)
    output_gradient(dY, x, W_down.shape[1])
