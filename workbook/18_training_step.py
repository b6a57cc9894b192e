"""Workbook, lesson 18 · One training step, by hand (`lessons/18_training_step.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 18

Shapes use the course's dimension names: b batch, h query heads, h_kv key/value heads, n_q
queries, n_k keys, d_h head size; `...` stands for any leading axes. A gradient has the shape of
what it is the gradient of, and dX names the gradient of the loss with respect to X.
"""
from __future__ import annotations

import math

import numpy as np

from transformer import AdamWState  # the optimiser's memory: m, v (dicts of arrays) and the step t
from transformer import decays_by_default  # decays_by_default(name, p): True for matrices (p.ndim >= 2)
from transformer import repeat_kv  # or your own from 07


def cross_entropy(logits, targets, *, ignore_index: int = -100):  # [..., v], [...] int -> a number
    """The mean cross-entropy over the positions that have a target: the loss of a language model.

        −log p_t = −log softmax(z)_t = LSE(z) − z_t,     LSE(z) = log Σ_j e^(z_j)
        L = (1/N) Σ over the N kept positions of −log p_t

    logits z (..., v): one row of v scores a position, such as (b, n, v); targets (...) the
    index of the right token at each position, or ignore_index (−100: padding, the prompt) where
    a position is not scored.  ->  the loss, a number (a float or a 0-d array).
    Stable: with m = max_j z_j, LSE(z) − z_t = log Σ_j e^(z_j − m) − (z_t − m), two small numbers
    (e^z overflows for logits of a few hundred; m + … − z_t loses digits when m is large).
    With every position ignored there is nothing to average: the loss is 0. A kept target outside
    [0, v) is no token: raise ValueError naming it (np.take_along_axis would raise IndexError past
    v, and read a negative one from the end of the row).
    Example: logits [[0, 0], [5, 1]], targets [1, −100]: L = −log ½ = 0.6931.

    After trying: the package's version is `transformer/core/loss.py`, `cross_entropy`.
    """
    raise NotImplementedError(
        "cross_entropy: start with keep = targets != ignore_index and the row max m (keepdims=True); then "
        "log Σ_j e^(z_j − m) per position, and the target's logit with np.take_along_axis. Check the example.")


def cross_entropy_backward(logits, targets, *, ignore_index: int = -100):  # [..., v], [...] -> [..., v]
    """Gradient of the mean cross-entropy with respect to the logits. Saved from the forward: the logits.

        ∂(LSE(z) − z_t)/∂z_j = softmax(z)_j − 1[j = t]
        dz = (softmax(z) − one_hot(t)) / N      on the kept rows,   0 on the ignored ones

    logits (..., v), targets (...)  ->  dz (..., v), in the logits' dtype. N counts the kept
    positions (at least 1: with none kept, dz is 0). Each kept row sums to 0.
    Example: logits [[0, 0], [5, 1]], targets [1, −100]: dz = [[0.5, −0.5], [0, 0]].

    After trying: the package's version is `transformer/core/loss.py`, `cross_entropy_backward`.
    """
    raise NotImplementedError(
        "cross_entropy_backward: start with the softmax of each row (minus its max first) and the one-hot "
        "of the targets, np.arange(v) == t[..., None]; then divide by N and zero the ignored rows.")


def lm_head_backward(d_logits, x, W_E):  # [b, n, v], [b, n, d], [v, d] -> dx [b, n, d], dW_E [v, d]
    """Gradients of the tied LM head, logits = X W_Eᵀ (lesson 01's head, sharing the embedding table):
    the first step of the backward after the loss. Saved from the forward: X, the final normed
    hidden states.

        dX   = d_logits W_E                  (…, v) @ (v, d)
        dW_E = d_logitsᵀ X                   (v, b·n) @ (b·n, d): summed over every position

    d_logits (b, n, v) or (n, v); x (…, d); W_E (v, d)  ->  dx (…, d), dW_E (v, d).
    The table is also the embedding: its whole gradient is this dW_E plus `embed_backward`'s.
    Example: d_logits = [[1, 0, 2]], x = [[1, 1]], W_E = [[1, 0], [0, 1], [1, 1]]: dx = [[3, 2]],
    dW_E = [[1, 1], [0, 0], [2, 2]].

    After trying: the package's version is `transformer/core/embedding.py`, `lm_head_backward`.
    """
    raise NotImplementedError(
        "lm_head_backward: start from the forward, logits = x @ W_E.T, and write each product's shapes; dx "
        "takes W_E as it is. For dW_E flatten the leading axes first, then check the example.")


def rms_norm_backward(dY, x, gamma, eps: float = 1e-6):  # [..., d] ×2, [d] -> dx [..., d], dgamma [d]
    """Gradients of Y = γ ∘ x̂, x̂ = x / r, r = √(mean(x²) + ε) (lesson 10's RMSNorm), the
    first backward the block meets after the LM head. Saved from the forward: x (r is recomputed).

        g  = dY ∘ γ                            the gradient that reaches x̂
        dX = (g − x̂ ∘ mean(g ∘ x̂)) / r         r depends on x too: the second term
        dγ = Σ over every row of dY ∘ x̂        γ is shared by all positions

    dY, x (..., d), gamma (d)  ->  dx (..., d) in x's dtype, dgamma (d). The means run over the
    last axis with keepdims=True; dγ sums every axis but the last.
    Example (eps=0): dY = [[1, 0]], x = [[3, 4]], γ = [1, 1]: r = √12.5, x̂ = [0.8485, 1.1314],
    mean(g ∘ x̂) = 0.4243, dx = [[0.1810, −0.1358]], dγ = [0.8485, 0].

    After trying: the package's version is `transformer/core/layers.py`, `rms_norm_backward`.
    """
    raise NotImplementedError(
        "rms_norm_backward: start with r = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps), x̂ = x / r and "
        "g = dY * gamma; write dγ first (the easy one), then dX, and check both on the example.")


def swiglu_ffn_backward(dY, x, W_gate, W_up, W_down):
    # [..., d], [..., d], [d, d_ff] ×2, [d_ff, d] -> dx [..., d], dW_gate [d, d_ff], dW_up [d, d_ff], dW_down [d_ff, d]
    """Gradients of Y = H W_down, H = SiLU(A) ∘ U, A = x W_gate, U = x W_up (lesson 10's SwiGLU).
    Saved from the forward: x (A and U are recomputed: two products instead of two (..., d_ff) arrays).

        dH = dY W_downᵀ,             dW_down = Hᵀ dY
        dA = dH ∘ U ∘ SiLU'(A),      dU = dH ∘ SiLU(A)         the product rule on H
        SiLU(a) = a σ(a),            SiLU'(a) = σ(a)(1 + a(1 − σ(a)))
        dX = dA W_gateᵀ + dU W_upᵀ                             x feeds both branches: they add
        dW_gate = Xᵀ dA,             dW_up = Xᵀ dU

    Each weight is shared by every position, so its gradient sums over all of them: flatten the
    leading axes first (X = x.reshape(-1, d)) and each Xᵀ dA is one (d, d_ff) sum.
    dx comes back in x's shape. Example with d = d_ff = 1: x = [[1]], W_gate = [[0]], W_up = [[2]],
    W_down = [[3]], dY = [[1]]: A = 0, so SiLU(A) = 0 and SiLU'(A) = ½; dH = 3, dA = 3·2·½ = 3,
    dU = 0: dx = [[0]], dW_gate = [[3]], dW_up = [[0]], dW_down = [[0]].

    After trying: the package's version is `transformer/core/layers.py`, `swiglu_ffn_backward`.
    """
    raise NotImplementedError(
        "swiglu_ffn_backward: start by recomputing the forward on X = x.reshape(-1, d): A, U, σ(A), SiLU(A) and "
        "H; then go backwards one line of the docstring at a time, checking each shape.")


def linear_backward(dY, x, W, has_bias: bool = False):  # [..., d_out], [..., d_in], [d_in, d_out] -> dx, dW, db
    """Gradients of the linear layer Y = X W + b, the step met most often going backwards (W_o,
    then W_q, W_k and W_v on the attention side). Saved from the forward: the input X.

        dX = dY Wᵀ            (..., d_out) @ (d_out, d_in)
        dW = Xᵀ dY            summed over every leading position: each (batch, position) adds its outer product
        db = Σ_rows dY        (d_out,); None when the layer has no bias (has_bias=False)

    dY (..., d_out), x (..., d_in), W (d_in, d_out)  ->  dx (..., d_in), dW (d_in, d_out), db (d_out,) or None;
    in the model the leading axes are (b, n), and W_o is (h·d_h, d).
    W is shared by every position, so flatten the leading axes first (X = x.reshape(-1, d_in),
    G = dY.reshape(-1, d_out)): Xᵀ G is then one (d_in, d_out) sum over all rows.
    Example: x = [[1], [2]], W = [[3]], dY = [[1], [1]], has_bias=True: dx = [[3], [3]],
    dW = [[3]] (1·1 + 2·1), db = [2].

    After trying: the package's version is `transformer/core/layers.py`, `linear_backward`.
    """
    raise NotImplementedError(
        "linear_backward: start by writing each result's shape from the docstring; then X = x.reshape(-1, d_in) "
        "and G = dY.reshape(-1, d_out), and find the one product of X, G and W that has each shape.")


def merge_heads_backward(dY, h: int):  # [b, n, h·d_h] -> [b, h, n, d_h]
    """Gradient of merge_heads (lesson 04), which joined the heads' outputs (b, h, n, d_h) into
    (b, n, h·d_h) before W_o. It only moved numbers, so the gradient moves them back: each entry
    of dY goes to the head and feature it came from.

        merge_heads:  (b, h, n, d_h) -> (b, n, h, d_h) -> (b, n, h·d_h)
        backward:     (b, n, h·d_h) -> (b, n, h, d_h) -> (b, h, n, d_h)     the steps in reverse

    dY (b, n, h·d_h), h the number of heads  ->  (b, h, n, d_h), d_h = dY.shape[-1] // h.
    Head j owns the columns j·d_h … (j + 1)·d_h − 1 of dY, one block each.
    Example: dY = [[[1, 2, 3, 4]]] (b = n = 1), h = 2: [[[[1, 2]], [[3, 4]]]].

    After trying: the package's version is `transformer/core/heads.py`, `merge_heads_backward`.
    """
    raise NotImplementedError(
        "merge_heads_backward: start by writing the forward's two steps and their shapes; then undo them in "
        "reverse order, checking the example: head 0 gets columns 0 and 1.")


def softmax_backward(dP, P):  # [..., n], [..., n] -> [..., n]
    """Gradient of P = softmax(S) along the last axis. Saved from the forward: P itself (not S).

        ∂P_j/∂S_k = P_j (δ_jk − P_k),   so   dS = P ∘ (dP − rowsum(dP ∘ P))

    dP, P (..., n)  ->  dS (..., n). ∘ is the elementwise product, rowsum keeps its axis (..., 1).
    A masked entry has P = 0 and gets dS = 0; a fully masked row (all P = 0) gets 0 throughout.
    Example: dP = [1, 0, 5], P = [0.5, 0.5, 0] give dS = [0.25, −0.25, 0].

    After trying: the package's version is `transformer/core/attention.py`, `softmax_backward`.
    """
    raise NotImplementedError(
        "softmax_backward: start with the rowsum of dP ∘ P over the last axis with keepdims=True, (..., 1); "
        "check it on the example: 1·0.5 + 0·0.5 + 5·0 = 0.5.")


def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
    # [b, h, n_q, d_h], q, k/v [b, h_kv, n_k, d_h], P [b, h, n_q, n_k] -> dq, dk, dv
    """Gradients of O = P V, P = softmax(S), S = Q Kᵀ · scale (+ mask), scale = 1/√d_h unless given.
    Saved from the forward: q, k, v and the weights P (whose zeros already hold the mask).

        dV = Pᵀ dO                      (n_k, n_q) @ (n_q, d_h)  per head
        dP = dO Vᵀ                      (n_q, d_h) @ (d_h, n_k)
        dS = P ∘ (dP − rowsum(dP ∘ P))  softmax_backward
        dQ = dS K · scale,   dK = dSᵀ Q · scale

    dO (b, h, n_q, d_h); q (b, h, n_q, d_h); k, v (b, h_kv, n_k, d_h); P (b, h, n_q, n_k)
    ->  dq (b, h, n_q, d_h), dk and dv (b, h_kv, n_k, d_h).
    GQA (h_kv < h): the forward repeated each key/value head for its h / h_kv query heads, so
    dk and dv sum the gradients of those copies back into one head each.

    After trying: the package's version is `transformer/core/attention.py`, `scaled_dot_product_attention_backward`.
    """
    raise NotImplementedError(
        "scaled_dot_product_attention_backward: start with h_kv = h and write dV = Pᵀ dO with .swapaxes(-1, -2); "
        "check each gradient's shape against the docstring as you go. Leave GQA for last: then recall which "
        "query heads shared each key/value head (lesson 07).")


def apply_rope_half_backward(dY, cos, sin):  # [..., n, d_h], [n, d_h/2] ×2 -> [..., n, d_h]
    """Gradient of rotate-half RoPE (lesson 02), which the backward meets after attention's, on dq
    and dk. Saved from the forward: the cos and sin tables.

    The forward rotates each pair (x₁, x₂) = (x_i, x_{i + d_h/2}) by θ:
        y₁ = x₁·cos θ − x₂·sin θ,   y₂ = x₁·sin θ + x₂·cos θ
    A rotation's Jacobian is the rotation matrix, so the backward multiplies by its transpose, the
    rotation by −θ:
        dX₁ = dY₁·cos θ + dY₂·sin θ,   dX₂ = −dY₁·sin θ + dY₂·cos θ

    dY (..., n, d_h); cos, sin (n, d_h/2), one angle per position and pair  ->  dX (..., n, d_h).
    Example (d_h = 2, θ with cos θ = 0.6, sin θ = 0.8): dY = [[1, 2]] gives dX = [[2.2, 0.4]].

    After trying: the package's version is `transformer/core/positions.py`, `apply_rope_half_backward`.
    """
    raise NotImplementedError(
        "apply_rope_half_backward: start by splitting dY into its two halves along the last axis (dY₁, dY₂), "
        "each (..., n, d_h/2) like cos and sin; write the 2×2 rotation by −θ on paper first.")


def split_heads_backward(dX):  # [b, h, n, d_h] -> [b, n, h·d_h]
    """Gradient of split_heads (lesson 04), which cut Q, K and V (b, n, h·d_h) into heads
    (b, h, n, d_h). It only moved numbers, so the gradient moves them back: dX joins the heads
    again, exactly as merge_heads does in the forward.

        split_heads:  (b, n, h·d_h) -> (b, n, h, d_h) -> (b, h, n, d_h)
        backward:     (b, h, n, d_h) -> (b, n, h, d_h) -> (b, n, h·d_h)     the steps in reverse

    dX (b, h, n, d_h)  ->  (b, n, h·d_h): column j·d_h + i is head j's feature i.
    Example: dX = [[[[1, 2]], [[3, 4]]]] (b = n = 1, h = d_h = 2): [[[1, 2, 3, 4]]].

    After trying: the package's version is `transformer/core/heads.py`, `split_heads_backward`.
    """
    raise NotImplementedError(
        "split_heads_backward: start by moving the head axis back beside d_h (which two axes swap?), then "
        "join the last two axes with a reshape; check the example.")


def embed_backward(dX, ids, v: int):  # [b, n, d], [b, n] int -> [v, d]
    """Gradient of the lookup X[b, n] = W_E[ids[b, n]] (lesson 01), the last step of the backward.
    Saved from the forward: the ids.

        dW_E[t] = Σ over the positions (b, n) with ids[b, n] = t of dX[b, n]

    a scatter-add: a token used several times gets the sum of its rows' gradients, one never used
    gets 0. dX (*ids.shape, d): ids can be (b, n) or (n,)  ->  dW_E (v, d), in dX's dtype.
    Example: dX = [[[1], [2], [4]]], ids = [[2, 0, 2]], v = 3: dW_E = [[2], [0], [5]].
    With a tied LM head, W_E's whole gradient is this plus the head's.

    After trying: the package's version is `transformer/core/embedding.py`, `embed_backward`.
    """
    raise NotImplementedError(
        "embed_backward: start with dW = np.zeros((v, d)) and the rows of dX and the ids flattened to one axis; "
        "then make every row add to its token's row, and check the example: token 2 is used twice.")


def dropout(x, p: float, *, rng=None, mask=None, training: bool = True):  # [...] -> [...], keep [...] or None
    """Inverted dropout: zero each entry with probability p and scale the kept ones by 1/(1 − p).

        keep ~ Bernoulli(1 − p), one draw an entry      (True = kept)
        Y = X ∘ keep / (1 − p)                          so E[Y] = X: evaluation needs no rescaling

    x (...) any shape; p the probability of DROPPING an entry  ->  (Y of x's shape and dtype, keep),
    keep a boolean array of x's shape, saved for the backward. The decoder drops attention weights,
    P (b, h, n_q, n_k), when its config has dropout > 0.
    The mask: the one given (mask=), or drawn with g = rng if rng is a np.random.Generator, else
    g = np.random.default_rng(rng) (an int seed), as keep = g.random(x.shape) >= p.
    With training=False (evaluation) or p = 0 dropout is the identity: return (x, None).
    Example: x = [1, 2, 3, 4], p = 0.5, mask = [True, False, True, False]: Y = [2, 0, 6, 0].

    After trying: the package's version is `transformer/core/attention.py`, `dropout`.
    """
    raise NotImplementedError(
        "dropout: start with the cases that do nothing (training=False, p = 0); then the mask= case on the "
        "example; draw the mask last.")


def dropout_backward(dY, mask, p: float):  # [...], keep [...] or None -> [...]
    """Gradient of Y = X ∘ keep / (1 − p). Saved from the forward: the keep-mask only (not X).

        dX = dY ∘ keep / (1 − p)        each entry depends on its own input alone

    the same mask and scale as the forward: a dropped entry passes no gradient back.
    dY (...), mask (...) boolean or None, p  ->  dX (...), in dY's dtype. mask None (the forward
    ran in evaluation, or with p = 0) means nothing was dropped: dX = dY. On attention weights,
    dY is dP (b, h, n_q, n_k), on its way to softmax_backward.
    Example: dY = [1, 1], mask = [True, False], p = 0.5: dX = [2, 0].

    After trying: the package's version is `transformer/core/attention.py`, `dropout_backward`.
    """
    raise NotImplementedError(
        "dropout_backward: start from the forward's formula Y = X ∘ keep / (1 − p): what does one entry of Y "
        "change by when its own X moves by 1? Then handle mask None.")


def clip_by_global_norm(grads: dict, max_norm: float) -> float:
    """Cap the length of the whole gradient at max_norm, keeping its direction; in place.

        ‖g‖ = √(Σ over every array Σ over its entries g²)        one norm, all arrays as one long vector
        factor = min(1, max_norm / (‖g‖ + 1e-6))                  (torch's clip_grad_norm_)
        g ← factor · g                                            every array, the same factor

    grads: name -> array, each the shape of its parameter (a (d, d) matrix, a (d,) gain, …),
    scaled in place: the caller's arrays change. Returns ‖g‖ measured before clipping, a float.
    Sum the squares in float64: a float16 gradient of 300 squares to inf in float16.
    Example: g = {"a": [3, 4]}, max_norm = 1: returns 5.0, and g["a"] becomes ≈ [0.6, 0.8].

    After trying: the package's version is `transformer/train/optim.py`, `clip_by_global_norm`.
    """
    raise NotImplementedError(
        "clip_by_global_norm: start with the norm, one sum of squares over all of grads.values(); then the "
        "factor, and scale each array in place (g *= factor). Check the example.")


def lr_at(step: int, *, lr_max: float, warmup: int, total: int, lr_min: float = 0.0) -> float:
    """The learning rate η of update number `step` (0, 1, …): a linear warm-up, a cosine decay, then flat.

        step < warmup:          η = η_max · (step + 1) / warmup
        warmup ≤ step < total:  η = η_min + (η_max − η_min) · ½(1 + cos(π · (step − warmup) / (total − warmup)))
        step ≥ total:           η = η_min

    One number a step, the same for every parameter, a (d, d) matrix and a (d,) gain alike. The first
    update gets η_max / warmup, never 0; with warmup = 0 the first step is at the top, η_max.
    Example: lr_max=1, warmup=2, total=6: steps 0 … 7 give 0.5, 1, 1, 0.854, 0.5, 0.146, 0, 0.

    After trying: the package's version is `transformer/train/optim.py`, `lr_at`.
    """
    raise NotImplementedError(
        "lr_at: start with the three cases as an if / elif / else on step; the cosine's progress goes from 0 "
        "at step = warmup to 1 at step = total. Check the example's eight numbers.")


def adamw_step(params: dict, grads: dict, state: AdamWState, lr: float, *, betas=(0.9, 0.95), eps: float = 1e-8,
               weight_decay: float = 0.1, decay=None) -> None:
    """One AdamW update of every parameter, in place (decoupled weight decay, Loshchilov & Hutter).

    With g the gradient, t the step count after this step, η = lr, λ = weight_decay:

        θ ← θ − η·λ·θ                   only where decay(name) is True; never through m or v
        m ← β₁·m + (1 − β₁)·g
        v ← β₂·v + (1 − β₂)·g²
        m̂ = m / (1 − β₁ᵗ),   v̂ = v / (1 − β₂ᵗ)
        θ ← θ − η·m̂ / (√v̂ + ε)

    params, grads: name -> array, each gradient the shape of its parameter (a matrix (d, d),
    a vector (d,), …). state: `T.adamw_state(params)` (m and v zero, t = 0); this step adds 1
    to state.t and updates state.m, state.v and every params[name] in place. Returns None.
    decay(name) -> bool picks the decayed parameters; None means decays_by_default(name, p).
    Example: θ = [1, −2] (a vector: not decayed by default), g = [0.5, 0.5], lr = 0.1: at the first
    step m̂ = g and v̂ = g², so θ moves by η against the sign of g, to ≈ [0.9, −2.1], and state.t = 1.

    After trying: the package's version is `transformer/train/optim.py`, `adamw_step`.
    """
    raise NotImplementedError(
        "adamw_step: start by counting the step (state.t) and the two bias corrections 1 − β₁ᵗ and 1 − β₂ᵗ; "
        "then loop over params.items(). Write into the arrays (p -= …, m *= …), never rebind them: the "
        "caller must see the new values.")
