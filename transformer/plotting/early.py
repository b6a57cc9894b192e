"""Drawing helpers of the early lessons (01–03), and the small heatmap and axes helpers that
decoding.py (lessons 06–08) shares: the long matplotlib blocks live here, so a lesson's code
cell shows the concept and one call draws it.

Every function draws on the axes it is given (or makes its own figure), returns
`(fig, ax)` or `(fig, axes)` and never calls `plt.show()`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .style import (style_axes, ANNOT_SIZE, LABEL_SIZE, LINE_COLORS, OFF_COLOR, ON_COLOR, SCORES_CMAP, TICK_SIZE,
                    TITLE_SIZE, WEIGHTS_CMAP)

__all__ = ["own_axes", "style_axes", "matrix", "soft_lookup", "weighted_sum", "overflow", "token_rows",
           "shape_pipeline", "position_tables", "rope_rotation", "rope_layouts", "rope_decay"]


def own_axes(ax, *, figsize):  # (fig, ax): the given axes and its figure, or a new one-panel figure
    return plt.subplots(figsize=figsize) if ax is None else (ax.figure, ax)



def matrix(ax, a, rows=None, cols=None, *, signed=False, vmin=None, vmax=None, title=None, xlabel=None,
           ylabel=None, annotate=False, fmt=".2f", colorbar=None):
    """An (r, c) matrix as a heatmap: weights on white-to-blue from 0, or (signed) scores on a diverging
    map centred on 0; NaN cells (no value: hidden by a mask) grey. rows, cols: tick labels.
    colorbar: its label, or None for no colour bar. Returns the image.
    """
    a = np.asarray(a, dtype=np.float64)
    if signed:
        lim = float(np.nanmax(np.abs(a))) or 1.0
        vmin, vmax, cmap = (-lim if vmin is None else vmin), (lim if vmax is None else vmax), SCORES_CMAP
    else:
        vmin, vmax, cmap = (0.0 if vmin is None else vmin), (vmax or float(np.nanmax(a)) or 1.0), WEIGHTS_CMAP
    im = ax.imshow(a, cmap=plt.get_cmap(cmap).with_extremes(bad=OFF_COLOR), vmin=vmin, vmax=vmax,
                   aspect="auto", interpolation="nearest")
    if cols is not None:
        ax.set_xticks(range(a.shape[1]), [str(t) for t in cols], rotation=90 if len(str(cols[0])) > 2 else 0)
    if rows is not None:
        ax.set_yticks(range(a.shape[0]), [str(t) for t in rows])
    if annotate:
        top = max(abs(vmin), abs(vmax))
        for (i, j), x in np.ndenumerate(a):
            if np.isfinite(x):
                ax.text(j, i, format(x, fmt), ha="center", va="center", fontsize=ANNOT_SIZE,
                        color="white" if abs(x) > 0.55 * top else "black")
    style_axes(ax, title, xlabel, ylabel)
    if colorbar is not None:
        cb = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.ax.tick_params(labelsize=TICK_SIZE)
        cb.set_label(colorbar, fontsize=LABEL_SIZE)
    return im


# ---------------------------------------------------------------- lesson 03

def soft_lookup(q, K, V, p, out, axes=None, *, names=None):
    """The worked example of attention in 2-D: one query against n keys, then the blend of the values.

    q (2,), K (n, 2), V (n, 2), p (n,) the weights, out (2,) = Σ_j p_j V_j.
    Left: the keys and the query as arrows (score = q·k/√d_k). Right: the values as points, a
    line from each to the output whose width is its weight; the output sits inside their triangle.
    Returns (fig, (ax_keys, ax_values)).
    """
    q, K, V, p, out = (np.asarray(a, dtype=np.float64) for a in (q, K, V, p, out))
    n = K.shape[0]
    names = names or [f"token {j}" for j in range(n)]
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(14, 6.2), layout="constrained")
    ax_k, ax_v = axes
    fig = ax_k.figure
    for j in range(n):
        col = LINE_COLORS[j + 2]
        ax_k.annotate("", xy=K[j], xytext=(0, 0),
                      arrowprops=dict(arrowstyle="-|>", color=col, linewidth=2.5, mutation_scale=18))
        ax_k.text(*(K[j] + 0.12), f"k{j} = {_vec(K[j])}\n{names[j]}", color=col, fontsize=LABEL_SIZE)
        ax_v.plot(*zip(V[j], out), color=col, linewidth=1 + 12 * p[j], alpha=0.6, solid_capstyle="round")
        ax_v.plot(*V[j], "o", color=col, markersize=12, markeredgecolor="black")
        ax_v.text(V[j][0] + 0.15, V[j][1] + 0.15, f"v{j} = {_vec(V[j])}\np{j} = {p[j]:.3f}", color=col,
                  fontsize=LABEL_SIZE)
    ax_k.annotate("", xy=q, xytext=(0, 0),
                  arrowprops=dict(arrowstyle="-|>", color="black", linewidth=3, mutation_scale=20))
    ax_k.text(q[0] + 0.12, q[1] - 0.35, f"q = {_vec(q)}", fontsize=LABEL_SIZE, fontweight="bold")
    ax_v.plot(*out, "*", color="black", markersize=22)
    ax_v.text(out[0] + 0.2, out[1] - 0.45, f"output = Σ p_j v_j\n= ({out[0]:.2f}, {out[1]:.2f})",
              fontsize=LABEL_SIZE, fontweight="bold")
    ax_v.fill(*V[list(range(n)) + [0]].T, color="grey", alpha=0.08)  # the output lies inside this polygon
    for a, pts in ((ax_k, np.vstack([K, q, [0, 0]])), (ax_v, np.vstack([V, out]))):
        lo, hi = pts.min(0) - 0.6, pts.max(0) + 1.6
        a.set_xlim(lo[0], hi[0]), a.set_ylim(lo[1], hi[1]), a.set_aspect("equal")
        a.axhline(0, color="grey", linewidth=0.6), a.axvline(0, color="grey", linewidth=0.6)
    style_axes(ax_k, "1. The query is compared with every key", "dimension 0", "dimension 1", grid=True)
    style_axes(ax_v, "2. The output blends the values by the weights", "dimension 0", "dimension 1", grid=True)
    return fig, (ax_k, ax_v)


def _vec(v):
    return "(" + ", ".join(f"{x:g}" for x in v) + ")"


def weighted_sum(Pw, V, O, tokens, row, axes=None, *, title=None):
    """P @ V = O drawn as three heatmaps side by side, with row `row` outlined in each and its
    weights written in P.

    Pw (n, n) weights, V (n, d_v), O (n, d_v); tokens label the rows (and P's columns).
    The outlined row of P times V is the outlined row of O: one query's weighted sum.
    Returns (fig, axes).
    """
    Pw, V, O = (np.asarray(a, dtype=np.float64) for a in (Pw, V, O))
    n, d_v = V.shape
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(19, 6.4), layout="constrained",
                                 gridspec_kw={"width_ratios": [n, d_v, d_v]})
    fig = axes[0].figure
    lim = float(max(np.abs(V).max(), np.abs(O).max()))
    dims = [str(i) for i in range(d_v)]
    matrix(axes[0], Pw, tokens, tokens, vmax=1.0, title="P  (weights, n × n)   ×", xlabel="key j",
           ylabel="query i", colorbar="weight")
    for j, p in enumerate(Pw[row]):  # the weights of the outlined row, written out
        axes[0].text(j, row, f"{p:.2f}", ha="center", va="center", fontsize=ANNOT_SIZE,
                     color="white" if p > 0.55 else "black")
    for a, M, name in ((axes[1], V, "V  (values, n × d_v)   ="), (axes[2], O, "O = P V  (outputs, n × d_v)")):
        matrix(a, M, tokens, dims, signed=True, vmin=-lim, vmax=lim, title=name, xlabel="dimension",
               colorbar="value" if a is axes[2] else None)
    for a, width in ((axes[0], n), (axes[2], d_v)):  # one row of P, times all of V, gives one row of O
        a.add_patch(Rectangle((-0.5, row - 0.5), width, 1, fill=False, edgecolor="black", linewidth=3))
    axes[1].add_patch(Rectangle((-0.5, -0.5), d_v, n, fill=False, edgecolor="black", linewidth=3,
                                linestyle="--"))
    if title:
        fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig, axes


def overflow(offsets, curves, exact, ax=None, *, limits=None):
    """softmax([c, c+1, c+2]): weight of the largest logit, naive vs stable, against the offset c.

    curves: {dtype name: (naive (len(c),), stable (len(c),))}; exact: the true weight.
    limits: {dtype name: ln(largest finite number)}. Where the naive formula gives NaN it has
    no value: that range is drawn as a labelled band under the axis, never as points.
    Returns (fig, ax).
    """
    fig, ax = own_axes(ax, figsize=(12, 6.5))
    offsets = np.asarray(offsets, dtype=np.float64)
    names = list(curves)
    ax.plot(offsets, curves[names[-1]][1], color=LINE_COLORS[2], linewidth=7, alpha=0.5,
            label=f"stable (x − max), {names[-1]}")
    ax.plot(offsets, curves[names[0]][1], color="black", linewidth=1.5, linestyle=(0, (4, 3)),
            label=f"stable (x − max), {names[0]}: on top of {names[-1]}")
    cols = {names[0]: LINE_COLORS[1], names[-1]: LINE_COLORS[0]}
    for k, name in enumerate(names):
        naive = np.asarray(curves[name][0], dtype=np.float64)
        col = cols[name]
        ok = ~np.isnan(naive)
        ax.plot(offsets[ok], naive[ok], color=col, linewidth=2.5, label=f"naive eˣ/Σeˣ, {name}")
        bad = offsets[~ok]
        if bad.size:  # NaN is "no number": a hatched band in the strip under 0, not points on the curve
            y0 = -0.09 - 0.09 * k
            ax.add_patch(Rectangle((bad.min(), y0), bad.max() - bad.min(), 0.07, facecolor="white",
                                   edgecolor=col, hatch="///", linewidth=1.5))
            inside = bad.max() - bad.min() > 0.5 * (offsets.max() - offsets.min())  # room in the band?
            ax.text(bad.min() + (0.8 if inside else -0.8), y0 + 0.035,
                    f"naive {name} = NaN (∞/∞) from c = {bad.min():g} on", color=col, fontsize=TICK_SIZE + 1,
                    va="center", ha="left" if inside else "right", bbox=dict(facecolor="white", edgecolor="none", pad=1))
        if limits and name in limits:
            c_lim = limits[name] - 2.0  # the largest logit, c + 2, crosses the limit here
            ax.axvline(c_lim, color=col, linestyle="--", linewidth=1.5)
            right = k == 0
            ax.text(c_lim + (1.5 if right else -1.5), 0.32, f"largest logit c+2 > {limits[name]:.1f}:\n"
                    f"eˣ overflows {name}", color=col, fontsize=LABEL_SIZE, ha="left" if right else "right")
    ax.axhline(exact, color="grey", linewidth=0.8, linestyle=":")
    ax.axhline(0, color="black", linewidth=1.0)
    ax.axhspan(-0.2, 0, color=OFF_COLOR, alpha=0.5, zorder=0)  # the strip under 0 holds no weights
    ax.set_ylim(-0.2, 1)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.legend(fontsize=TICK_SIZE + 1, frameon=False, loc="upper center")
    style_axes(ax, f"softmax([c, c+1, c+2]): weight of the largest logit (exact: {exact:.3f})",
               "offset c of the logits", "weight", grid=True)
    return fig, ax


# ---------------------------------------------------------------- lesson 01

def token_rows(rows, ax=None, *, title=None):
    """Tokenized text as rows of boxes: the piece on top of each box, its number below.

    rows: a list of (pieces, numbers, colour, label): pieces as they should read (spaces as ␣),
    numbers the id or byte value under each, colour of the boxes, label left of the row.
    Returns (fig, ax).
    """
    fig, ax = own_axes(ax, figsize=(17, 1.5 + 1.2 * len(rows)))
    x_max = 0.0
    top = 1.1 * (len(rows) - 1)
    for k, (pieces, numbers, colour, label) in enumerate(rows):
        y, x = top - 1.1 * k, 0.0
        for piece, number in zip(pieces, numbers):
            w = max(0.9, 0.2 * len(piece) + 0.5)  # box width in data units, from the piece's length
            ax.add_patch(Rectangle((x, y), w - 0.08, 0.8, color=colour, alpha=0.25))
            ax.text(x + (w - 0.08) / 2, y + 0.5, piece, ha="center", va="center", fontsize=LABEL_SIZE + 1,
                    fontfamily="monospace")
            ax.text(x + (w - 0.08) / 2, y + 0.15, str(number), ha="center", va="center", fontsize=TICK_SIZE,
                    color="#333333")
            x += w
        ax.text(-0.3, y + 0.4, label, ha="right", va="center", fontsize=LABEL_SIZE)
        x_max = max(x_max, x)
    ax.set_xlim(-0.2, x_max + 0.2), ax.set_ylim(-0.1, top + 1.0), ax.axis("off")
    if title:
        ax.set_title(title, fontsize=TITLE_SIZE)
    return fig, ax


def shape_pipeline(stages, notes, ax=None, *, title=None):
    """A row of boxes, one per stage of the model, with the operation between two written on its arrow.

    stages: a list of (name, shape text, symbolic shape or None); the last box is drawn in red (the
    result). notes: the len(stages) − 1 operations between them. Returns (fig, ax).
    """
    fig, ax = own_axes(ax, figsize=(18, 3.8))
    fig.subplots_adjust(left=0.01, right=0.99)  # the diagram uses the full width
    xs = np.arange(len(stages)) * 4.0
    for k, (name, shape, sym) in enumerate(stages):
        colour = LINE_COLORS[1] if k == len(stages) - 1 else ON_COLOR
        ax.add_patch(Rectangle((xs[k] - 1.25, 0.0), 2.5, 1.6, color=colour, alpha=0.15))
        ax.text(xs[k], 1.3, name, ha="center", va="center", fontsize=LABEL_SIZE + 1, fontweight="bold")
        ax.text(xs[k], 0.75, shape, ha="center", va="center", fontsize=LABEL_SIZE, fontfamily="monospace")
        if sym:
            ax.text(xs[k], 0.22, sym, ha="center", va="center", fontsize=TICK_SIZE + 1, color="#444444")
        if k:  # the operation between two stages, written on its arrow
            ax.annotate("", xy=(xs[k] - 1.27, 0.8), xytext=(xs[k - 1] + 1.27, 0.8),
                        arrowprops=dict(arrowstyle="->", linewidth=2))
            ax.text((xs[k] + xs[k - 1]) / 2, 0.95, notes[k - 1], ha="center", va="bottom", fontsize=TICK_SIZE + 1)
    ax.set_xlim(xs[0] - 1.3, xs[-1] + 1.3), ax.set_ylim(-0.1, 1.75), ax.axis("off")
    if title:
        ax.set_title(title, fontsize=TITLE_SIZE)
    return fig, ax


# ---------------------------------------------------------------- lesson 02

def position_tables(tables, axes=None, *, suptitle=None):
    """Position tables (top row) and the cosine similarity of their rows (bottom row).

    tables: {title: (n, d) array}. The similarity of rows m and n, PE[m]·PE[n] / (‖PE[m]‖ ‖PE[n]‖),
    shows what a table says about distance: a table built from the distance alone is constant
    along every diagonal. Returns (fig, axes) with axes of shape (2, len(tables)).
    """
    k = len(tables)
    if axes is None:
        fig, axes = plt.subplots(2, k, figsize=(8.5 * k, 13), layout="constrained", squeeze=False)
    fig = axes[0][0].figure
    for j, (name, tab) in enumerate(tables.items()):
        tab = np.asarray(tab, dtype=np.float64)
        unit = tab / np.linalg.norm(tab, axis=1, keepdims=True)  # (n, d) unit rows
        lim = float(np.percentile(np.abs(tab), 99))  # a few outlier dimensions would wash out the rest
        matrix(axes[0][j], np.clip(tab, -lim, lim), signed=True, title=name, xlabel="dimension",
               ylabel="position", colorbar="value (clipped at the 99th percentile)")
        matrix(axes[1][j], unit @ unit.T, signed=True, vmin=-1, vmax=1, title="cosine similarity of its rows",
               xlabel="position n", ylabel="position m", colorbar="cos(P[m], P[n])")
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE)
    return fig, axes


def rope_rotation(pairs, theta, axes=None, *, suptitle=None):
    """RoPE's pairs as arrows on the unit circle, one panel per pair, one arrow per position.

    pairs: (n, d_h/2, 2) the rotated pairs of a vector whose pairs all start at (1, 0);
    theta: (d_h/2,) the angle per position of each pair. Returns (fig, axes).
    """
    n, k, _ = pairs.shape
    if axes is None:
        fig, axes = plt.subplots(1, k, figsize=(18, 5.2), layout="constrained")
    fig = axes[0].figure
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, n))
    for i, a in enumerate(axes):
        for m in range(n):
            a.annotate("", xy=pairs[m, i], xytext=(0, 0),
                       arrowprops=dict(arrowstyle="-|>", color=colours[m], linewidth=2.2, mutation_scale=16))
            if i == 0:
                a.text(*(pairs[m, i] * 1.17), str(m), ha="center", va="center", fontsize=TICK_SIZE,
                       color=colours[m])
        a.add_patch(plt.Circle((0, 0), 1, fill=False, color="grey", linestyle=":"))
        a.set_xlim(-1.35, 1.35), a.set_ylim(-1.35, 1.35), a.set_aspect("equal")
        a.axhline(0, color="grey", linewidth=0.5), a.axvline(0, color="grey", linewidth=0.5)
        style_axes(a, f"pair {i}: θ = {theta[i]:.3g} rad/token", f"x_{2 * i}", f"x_{2 * i + 1}")
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE)
    return fig, axes


def rope_layouts(p, ax=None):
    """The interleaved and rotate-half layouts of d_h dimensions, one colour per rotated pair, with
    an arrow from each dimension's interleaved slot to its rotate-half slot. p: the permutation."""
    p = [int(i) for i in p]
    d_h = len(p)
    fig, ax = own_axes(ax, figsize=(13, 4.2))
    cmap = plt.get_cmap("tab10")
    layouts = ((np.arange(d_h) // 2, np.arange(d_h), "interleaved"), (np.array(p) // 2, np.array(p), "rotate-half"))
    for row, (pair_of, dims, name) in enumerate(layouts):  # slot s holds dimension dims[s], of pair pair_of[s]
        y = 1 - row
        for s in range(d_h):
            ax.add_patch(Rectangle((s, y), 0.92, 0.6, color=cmap(pair_of[s]), alpha=0.85))
            ax.text(s + 0.46, y + 0.3, f"x{dims[s]}", ha="center", va="center", fontsize=LABEL_SIZE + 1,
                    color="white", fontweight="bold")
        ax.text(-0.2, y + 0.3, name, ha="right", va="center", fontsize=LABEL_SIZE + 1)
    for s in range(d_h):
        t = p.index(s)
        ax.annotate("", xy=(t + 0.46, 0.62), xytext=(s + 0.46, 1.0),
                    arrowprops=dict(arrowstyle="-|>", color="grey", linewidth=1.3))
    ax.set_xlim(-2.6, d_h), ax.set_ylim(-0.1, 1.75)
    ax.axis("off")
    ax.set_title("Same colour = one rotated pair.  p = " + str(p), fontsize=TITLE_SIZE)
    return fig, ax


def rope_decay(distance, bound, scores, ax=None, *, title=None):
    """RoPE's long-range decay: the shape of the upper bound and real scores against the distance m − n.

    distance: (r,) relative distances; bound: (r,) Σ_j |S_j| scaled to 1 at distance 0 (RoFormer §3.4.3);
    scores: {label: (r,)} scores of fixed q, k placed that far apart, each scaled to 1 at distance 0
    on its own (so a score may lie above the drawn line). Returns (fig, ax).
    """
    fig, ax = own_axes(ax, figsize=(12, 6))
    ax.plot(distance, bound, color="black", linewidth=3, label="shape of the bound  Σ_j |S_j|  (scaled to 1 at r = 0)")
    for k, (label, y) in enumerate(scores.items()):
        ax.plot(distance, y, color=LINE_COLORS[k], linewidth=1.2, alpha=0.8, label=label)
    ax.set_xscale("log")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.legend(fontsize=TICK_SIZE + 1, frameon=False)
    style_axes(ax, title, "distance m − n (tokens)", "each scaled to 1 at distance 0", grid=True)
    return fig, ax
