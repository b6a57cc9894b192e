# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Masks
#
# **What you will see.** Which (query, key) pairs each kind of attention lets through, drawn
# as boolean matrices with their cost (the number of attended pairs) in the title: causal vs
# bidirectional, padding in a batch, a sliding window, and the sparse patterns (strided,
# fixed, global, random, and BigBird's mix of them); how masks combine with `&` and `|`;
# and how the cost grows with the sequence length $n$ — $n^2$ for full attention, $n\cdot w$
# for a window, $n\sqrt n$ for the strided pattern — measured and against its formula.
#
# **In one line:** a decoder may not look ahead (causal), an encoder looks both ways, and
# full attention costs $n^2$ pairs, $n$ keys per row. Sparse patterns (window, strided, global,
# random; Longformer, Sparse Transformer, BigBird) cut that to a few keys per row — $w$ for a
# window, $r$ random ones, up to $2\sqrt n$ for the strided pattern with $\ell = \sqrt n$ — so the
# total grows about linearly in $n$ ($n\sqrt n$ for strided).
#
# A mask enters attention before the softmax: hidden pairs get score $-\infty$, so
# $e^{-\infty} = 0$ weight. In this package `True` means "may attend".
#
# $$P = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right),\qquad
#   M_{ij} = \begin{cases} 0 & \text{pair allowed} \\ -\infty & \text{pair hidden}\end{cases}$$

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 shortens the cost-vs-n sweep for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Causal, bidirectional, padding
#
# An **encoder** (BERT) lets every token see every other: bidirectional. A **decoder** (GPT,
# Llama) must not see the future it is trained to predict: token $i$ sees keys $j \le i$,
# the lower triangle. In a **batch**, short sequences are padded to the longest;
# the padding mask hides the pad keys so they receive no weight. It hides pad *keys* only:
# the `[PAD]` query rows are still computed (in the padding panel below they attend to the
# real tokens like any other row), and their outputs are simply thrown away afterwards.

# %%
sentence = "The dog chased the squirrel because it".split()
short = "The dog barked".split()
n = len(sentence)
lengths = np.array([n, len(short)])
batch_tokens = [sentence, short + ["[PAD]"] * (n - len(short))]
causal, bidir = T.causal_mask(n), T.bidirectional_mask(n)  # (n, n)
pad = T.padding_mask(lengths, n)  # (b, 1, 1, n)
print("causal:", causal.shape, " padding:", pad.shape, "(b, 1, 1, n) broadcasts over heads and queries")

# Attention with the padding mask, on random q, k, v:
b, h, d_h = 2, 1, 8
q, k, v = (rng.normal(size=(b, h, n, d_h)) for _ in range(3))
_, w_pad = T.scaled_dot_product_attention(q, k, v, pad, return_weights=True)  # (b, h, n, n)
pad_ok = np.all(w_pad[1, :, :, len(short):] == 0) and np.allclose(w_pad.sum(-1), 1)
_, w_full = T.scaled_dot_product_attention(q[:1], k[:1], v[:1], return_weights=True)
unpadded_ok = np.allclose(w_pad[0], w_full[0])  # the full-length sequence is unaffected
print("pad keys get weight exactly 0, rows still sum to 1:", pad_ok)
print("the unpadded sequence's weights are unchanged:", unpadded_ok)
_, w_both = T.scaled_dot_product_attention(q, k, v, causal & pad, return_weights=True)
both_ok = np.all(w_both[..., ~causal] == 0) and np.all(w_both[1, :, :, len(short):] == 0)
print("causal & padding hides both the future and the pads:", both_ok)
assert pad_ok and unpadded_ok and both_ok

# %%
masks = {
    "bidirectional (encoder)": bidir,
    "causal (decoder)": causal,
    "padding (2nd sequence)": np.broadcast_to(pad[1, 0], (n, n)),
    "causal & padding": (causal & pad)[1, 0],
}
labels = {name: batch_tokens[1] if "padding" in name else sentence for name in masks}
fig, axes = P.mask_gallery(masks, ncols=4, labels=labels,
                           suptitle="Who may attend to whom: rows are queries, columns are keys")
P.save(fig, P.figure_path("05_causal_bidirectional_padding.png"))

# %% [markdown]
# ## 2. Local and sparse patterns
#
# Full attention costs $n^2$ pairs. Cheaper patterns keep a structured subset:
#
# - **sliding window** (Mistral): the $w$ most recent tokens, $i - w < j \le i$; as a
#   non-causal band, $|i - j| < w$, the same reach on both sides (Longformer's window, in an
#   encoder). Some texts write local attention as the interval
#   $[i - w, i + w]$, i.e. $|i - j| \le w$: there $w$ is the reach on each side, here it
#   counts the query itself, so their $w$ is our $w - 1$ (same idea, off by one);
# - **strided** (Sparse Transformer): the last $\ell$ tokens, plus the keys at distance
#   $\ell, 2\ell, …$ before;
# - **fixed** (Sparse Transformer): your own block, plus the last cell of each earlier block
#   (a "summary" column);
# - **global** (Longformer, BigBird): a few tokens such as `[CLS]` see and are seen by all;
# - **random** (BigBird): each query sees $r$ random keys;
# - **BigBird** combines band $|$ global $|$ random (below with a narrower band and fewer
#   random keys than the panels before it, so that all three parts stay visible).

# %%
n_s = 16 if FAST else 32
w, stride, block, r_rand = 4, 4, 8, 3  # r_rand: random keys per query
w_bb, r_bb = 2, 2  # BigBird panel: narrower band, fewer random keys, so its three parts stay apart
sparse = {
    f"sliding window (w={w}, causal)": T.sliding_window_mask(n_s, w),
    f"band |i−j|<{w}": T.sliding_window_mask(n_s, w, causal=False),
    f"strided (ℓ={stride}, causal)": T.strided_mask(n_s, stride),
    f"fixed (block {block}, causal)": T.fixed_mask(n_s, block),
    "global (token 0)": T.global_mask(n_s, [0]),
    f"random (r={r_rand} per row)": T.random_mask(n_s, r_rand, seed=0),
    f"BigBird: band |i−j|<{w_bb}\n| global (token 0) | random (r={r_bb} per row)":
        T.sliding_window_mask(n_s, w_bb, causal=False) | T.global_mask(n_s, [0]) | T.random_mask(n_s, r_bb, seed=1),
    "full": T.bidirectional_mask(n_s),
}
for name, m in sparse.items():
    print(f"{name.replace(chr(10), ' '):56s} {T.attended_pairs(m):5d} pairs of {n_s * n_s}")
fig, axes = P.mask_gallery(sparse, ncols=4, suptitle=f"Sparse and local patterns, n = {n_s}")
P.save(fig, P.figure_path("05_sparse_gallery.png"))

# %% [markdown]
# Hand counts to check against: a causal window of $w$ keys has $n w - w(w-1)/2$ pairs
# (the first $w-1$ rows see fewer); a band $|i - j| < w$ has $n(2w - 1) - w(w-1)$ (rows near
# either end see fewer); one global token adds a full row and a full column,
# $2n - 1$ pairs; random attention has exactly $r$ pairs per row. The fixed pattern with blocks of
# $b$ gives query $i$ its block up to itself, keys $b\lfloor i/b \rfloor \ldots i$, and the last key
# of each earlier block: $(i \bmod b) + 1 + \lfloor i/b \rfloor$ keys, checked row by row.

# %%
window_ok = T.attended_pairs(sparse[f"sliding window (w={w}, causal)"]) == n_s * w - w * (w - 1) // 2
band_ok = T.attended_pairs(sparse[f"band |i−j|<{w}"]) == n_s * (2 * w - 1) - w * (w - 1)
global_ok = T.attended_pairs(sparse["global (token 0)"]) == 2 * n_s - 1
random_ok = np.all(np.asarray(sparse[f"random (r={r_rand} per row)"]).sum(1) == r_rand)
print("window count = n·w − w(w−1)/2:", window_ok, "  band = n(2w − 1) − w(w − 1):", band_ok)
print("global = 2n − 1:", global_ok, "  random = r per row:", random_ok)
assert window_ok and band_ok and global_ok and random_ok

fixed = np.asarray(sparse[f"fixed (block {block}, causal)"])
by_rule = [list(range(i // block * block, i + 1)) + [c * block + block - 1 for c in range(i // block)]
           for i in range(n_s)]  # the keys of row i, as the text describes them
fixed_ok = all(sorted(np.flatnonzero(fixed[i]).tolist()) == sorted(keys) for i, keys in enumerate(by_rule))
count_ok = np.array_equal(fixed.sum(1), np.arange(n_s) % block + 1 + np.arange(n_s) // block)
print(f"fixed (block {block}): row {n_s - 1} sees keys {np.flatnonzero(fixed[n_s - 1]).tolist()}")
print("every row == its block so far + the last key of each earlier block:", fixed_ok,
      f"  keys a row == i mod {block} + 1 + ⌊i/{block}⌋:", count_ok)
assert fixed_ok and count_ok

# %% [markdown]
# ## 3. Combining masks
#
# Masks are sets of pairs: `&` keeps pairs both allow (intersection), `|` pairs either allows
# (union). A causal sliding window is "causal & band"; Longformer, an encoder, is "band | global":
# its window reaches both ways.
# Counting follows inclusion–exclusion: $|A\cup B| = |A| + |B| - |A\cap B|$.

# %%
band = T.sliding_window_mask(n_s, w, causal=False)
causal_s = T.causal_mask(n_s)
and_ok = np.array_equal(causal_s & band, T.sliding_window_mask(n_s, w))
print("causal & band == causal sliding window:", and_ok)
A, B = band, T.global_mask(n_s, [0])
ie_ok = T.attended_pairs(A | B) == T.attended_pairs(A) + T.attended_pairs(B) - T.attended_pairs(A & B)
print("|A ∪ B| = |A| + |B| − |A ∩ B| for band | global:", ie_ok)
assert and_ok and ie_ok
fig, axes = P.mask_gallery({f"A: band |i−j|<{w}": A, "B: global (token 0)": B, "A & B": A & B,
                            "A | B (Longformer)": A | B},
                           ncols=4, suptitle="Combining masks: & is both, | is either")
P.save(fig, P.figure_path("05_combining.png"))

# %% [markdown]
# ## 4. Cost against sequence length
#
# Each attended pair is one score to compute (and, without FlashAttention, one number to
# store). Full attention grows like $n^2$, causal like $n(n+1)/2$, a window like $n\,w$, the
# strided pattern with $\ell = \sqrt n$ like $n\sqrt n$. We count pairs in real masks
# (points) and compare with the closed forms (lines):
#
# - causal window: $n w - w(w-1)/2$
# - strided: row $i$ sees $\min(i+1, \ell)$ recent keys plus the $\lfloor i/\ell \rfloor$ keys
#   at distance $\ell, 2\ell, …$ (every $j \le i$ with $(i - j) \bmod \ell = 0$, beyond the
#   recent ones); with $n = q\ell + s$, $0 \le s < \ell$, the sum is
#   $\ell(\ell+1)/2 + (n-\ell)\ell + \ell\,q(q-1)/2 + s q$.

# %%
ns = 2 ** np.arange(6, 10 if FAST else 12)  # 64 … 512 (fast) or 2048
w_cost = 32


def strided_pairs(n, l):  # closed form, n ≥ l
    q_, s_ = divmod(n, l)
    return l * (l + 1) // 2 + (n - l) * l + l * q_ * (q_ - 1) // 2 + s_ * q_


formulas = {
    "full  n²": ns.astype(float) ** 2,
    "causal  n(n+1)/2": ns * (ns + 1) / 2.0,
    "strided ℓ=√n  ~ n√n": np.array([strided_pairs(n_, int(np.sqrt(n_))) for n_ in ns], float),
    f"window w={w_cost}  ~ n·w": ns * w_cost - w_cost * (w_cost - 1) / 2.0,
}
measured = {
    "full  n²": [T.attended_pairs(T.bidirectional_mask(n_)) for n_ in ns],
    "causal  n(n+1)/2": [T.attended_pairs(T.causal_mask(n_)) for n_ in ns],
    "strided ℓ=√n  ~ n√n": [T.attended_pairs(T.strided_mask(n_, int(np.sqrt(n_)))) for n_ in ns],
    f"window w={w_cost}  ~ n·w": [T.attended_pairs(T.sliding_window_mask(n_, w_cost)) for n_ in ns],
}
for name in formulas:
    print(f"{name:24s} measured {measured[name]}")
    assert np.array_equal(np.array(measured[name], float), formulas[name]), name
print("every measured count equals its formula: True")
l_last = int(np.sqrt(ns[-1]))
row_max = int(np.asarray(T.strided_mask(ns[-1], l_last)).sum(1).max())  # the busiest row of the largest mask
print(f"strided, n = {ns[-1]}, ℓ = {l_last}: at most {row_max} keys per row (2√n = {2 * np.sqrt(ns[-1]):.1f})")
assert row_max <= 2 * np.sqrt(ns[-1])
ratio = measured["full  n²"][-1] / measured[f"window w={w_cost}  ~ n·w"][-1]
print(f"at n = {ns[-1]}: full attention computes {ratio:.0f}× more scores than a {w_cost}-token window")

fig, ax = P.curves(ns, formulas, {k: np.array(v, float) for k, v in measured.items()},
                   ylabel="attended pairs (scores computed)", title="Attention cost: lines = formula, dots = counted in the mask")
P.save(fig, P.figure_path("05_cost_vs_n.png"))

# %% [markdown]
# On the course's website, pick a mask, its size and its parameter, and read its cost: every mask
# there was built by the functions above and counted by `T.attended_pairs`.
#
# <div class="tfs-view" data-view="masks" data-mask="window"></div>

# %% [markdown]
# **Takeaways.** A mask is a boolean matrix; its number of `True` entries is the cost of
# attention under it. Causal halves full attention but keeps it quadratic; windows and
# sparse patterns make it (nearly) linear in $n$, at the price of pairs that can no longer
# talk directly. Next: prefill, decode and the KV cache (lesson 06).

# %% [markdown]
# **Write it yourself.** `workbook/05_masks.py` holds `causal_mask`, `padding_mask`,
# `sliding_window_mask`, `strided_mask`, `fixed_mask` and `global_mask` as stubs with this lesson's
# formulas; fill them in, then run `python -m transformer check 05`: it runs the package's own test
# cases on your code and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 05` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/05_masks.py`.
#
# 1. **Code it.** Draw, as a 6 × 6 grid of ✓ and ·, the mask "causal window of 3, or token 0"
#    (every query keeps reading the first token, an "attention sink"), and count its pairs. Then
#    write it in NumPy with `np.tril`, `np.triu(…, k=-2)` and one column set to `True`, and compare
#    with `T.sliding_window_mask(6, 3) | (T.global_mask(6, [0]) & T.causal_mask(6))`.
# 2. How many pairs does a causal mask keep at n = 1000? What share of n² is that?
# 3. A causal window of w = 128 over n = 4096 tokens: count its pairs with a formula, then with
#    `T.attended_pairs`.
