"""The shared drawing helpers: where figures go, heat maps, head grids, curves, tile schedules, saving.

The package `transformer.plotting` re-exports every name here; the lessons' own drawing modules
(early, decoding, late, models) import from this module and style.py.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, BoundaryNorm

from ..backend import to_numpy
from ..files import write_atomic

__all__ = [
    "DPI", "TITLE_SIZE", "LABEL_SIZE", "TICK_SIZE", "ANNOT_SIZE", "LINE_COLORS",
    "WEIGHTS_CMAP", "SCORES_CMAP", "ON_COLOR", "OFF_COLOR", "PARTIAL_COLOR",
    "figures_dir", "figure_path", "fast", "visible_token", "style_axes", "new_figure",
    "attention_heatmap", "head_grid", "mask_gallery", "curves", "tile_schedule",
    "online_softmax_trace", "next_token_bars", "save", "MAX_FIGURE_INCHES", "MAX_TICK_LABELS",
]

# the style (sizes, colours, colour maps) lives in style.py, so the drawing modules share it without a cycle
from .style import (style_axes, DPI, TITLE_SIZE, LABEL_SIZE, TICK_SIZE, ANNOT_SIZE, WEIGHTS_CMAP, SCORES_CMAP,  # noqa: E402
                    ON_COLOR, OFF_COLOR, PARTIAL_COLOR, LINE_COLORS)

_REPO = Path(__file__).resolve().parents[2]
# Attention figures grow with the tokens; past these caps the cells shrink instead, so n tokens cost
# at most (MAX_FIGURE_INCHES · DPI)² pixels (24 in at 150 dpi: 3,600 px a side; drawing and saving
# take ~30 bytes a pixel, under 0.4 GB, whatever n).
MAX_FIGURE_INCHES = 24.0
MAX_TICK_LABELS = 64  # with more tokens, every k-th is labelled (ceil(n / 64)-th), not one per cell


# ---------------------------------------------------------------- where figures go

def figures_dir() -> Path:
    """$TRANSFORMER_FIGURES if set (tests write to a temporary folder), else the repo's figures/."""
    env = os.environ.get("TRANSFORMER_FIGURES")
    return Path(env) if env else _REPO / "figures"


def figure_path(name: str) -> Path:
    """figures_dir() / name, e.g. figure_path("03_scores.png")."""
    return figures_dir() / name


def fast() -> bool:
    """True when TRANSFORMER_FAST=1: lessons shrink sizes so the test suite stays quick."""
    return os.environ.get("TRANSFORMER_FAST", "0") not in ("", "0")


# ---------------------------------------------------------------- style helpers

def visible_token(tok: str) -> str:
    """Show a token's spaces: a leading space becomes '␣' and newlines '↵' (tokens often start with one)."""
    return str(tok).replace(" ", "␣").replace("\n", "↵")



def new_figure(nrows=1, ncols=1, *, figsize=None, squeeze=True, **kw):
    """plt.subplots with a size that suits slides (about 6.5 × 5 inches per panel, capped)."""
    if figsize is None:
        figsize = (min(4.0 + 4.2 * ncols, 17.0), min(1.2 + 3.8 * nrows, 14.0))
    fig, ax = plt.subplots(nrows, ncols, figsize=figsize, squeeze=squeeze, **kw)
    return fig, ax


def _as_np(a, ndim=None, name="array"):
    a = np.asarray(to_numpy(a))
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dims, got shape {a.shape}")
    return a


def _own_axes(ax, **kw):
    """(fig, ax): the given axes and its figure, or a new single-panel figure."""
    if ax is None:
        return new_figure(**kw)
    return ax.figure, ax


def _label_ticks(ax, q_labels, k_labels, n_q, n_k, rotate=True):
    if k_labels is not None:
        if len(k_labels) != n_k:
            raise ValueError(f"{len(k_labels)} key labels for {n_k} columns")
        step = -(-n_k // MAX_TICK_LABELS)  # 1 up to MAX_TICK_LABELS tokens
        ax.set_xticks(range(0, n_k, step))
        ax.set_xticklabels([str(t) for t in k_labels[::step]], rotation=90 if rotate else 0)
    if q_labels is not None:
        if len(q_labels) != n_q:
            raise ValueError(f"{len(q_labels)} query labels for {n_q} rows")
        step = -(-n_q // MAX_TICK_LABELS)
        ax.set_yticks(range(0, n_q, step))
        ax.set_yticklabels([str(t) for t in q_labels[::step]])


def _annotate(ax, a, fmt, norm_max, hidden=None):
    """Write each cell's value, white on dark cells and black on light ones; none on hidden cells."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if hidden is not None and hidden[i, j]:
                continue
            dark = abs(a[i, j]) > 0.55 * norm_max
            ax.text(j, i, format(a[i, j], fmt), ha="center", va="center", fontsize=ANNOT_SIZE,
                    color="white" if dark else "black")


# ---------------------------------------------------------------- attention

def attention_heatmap(weights, q_labels=None, k_labels=None, ax=None, title="Attention weights", *,
                      signed=False, vmin=None, vmax=None, annotate=None, fmt=".2f", colorbar=True,
                      cbar_label=None, xlabel="key  (attended to)", ylabel="query  (attending)", mask=None):
    """Heatmap of an (n_q, n_k) matrix: row i = what query i attends to.

    signed=False: weights in [0, 1] on a white-to-blue map (vmin 0, vmax the largest weight).
    signed=True: scores of either sign on a diverging map centred on 0.
    annotate: write the values in the cells (default: when the matrix is at most 8 × 8).
    mask: optional boolean (n_q, n_k), True = may attend; hidden cells are drawn grey (OFF_COLOR,
    the colormap's "bad" colour) with no number, whether or not the others carry theirs.
    Returns (fig, ax); ax.images[0] holds exactly `weights` (masked where hidden).
    """
    a = _as_np(weights, 2, "weights").astype(np.float64)
    n_q, n_k = a.shape
    fig, ax = _own_axes(ax, figsize=(min(2.5 + 0.55 * max(n_k, 6), MAX_FIGURE_INCHES),
                                     min(1.8 + 0.5 * max(n_q, 6), MAX_FIGURE_INCHES)))
    if signed:
        lim = float(np.max(np.abs(a))) or 1.0
        vmin, vmax = (-lim if vmin is None else vmin), (lim if vmax is None else vmax)
        cmap = SCORES_CMAP
    else:
        vmin = 0.0 if vmin is None else vmin
        vmax = (float(np.max(a)) or 1.0) if vmax is None else vmax
        cmap = WEIGHTS_CMAP
    hidden = np.zeros(a.shape, bool) if mask is None else ~np.broadcast_to(_as_np(mask, None).astype(bool), a.shape)
    cmap = plt.get_cmap(cmap).with_extremes(bad=OFF_COLOR)  # hidden cells: grey, not the colour of 0
    im = ax.imshow(np.ma.masked_where(hidden, a), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                   interpolation="nearest")
    _label_ticks(ax, q_labels, k_labels, n_q, n_k)
    if annotate is None:
        annotate = max(n_q, n_k) <= 8
    if annotate:
        _annotate(ax, a, fmt, max(abs(vmin), abs(vmax)), hidden)
    style_axes(ax, title, xlabel, ylabel)
    if colorbar:
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.ax.tick_params(labelsize=TICK_SIZE)
        cb.set_label(cbar_label or ("score" if signed else "weight"), fontsize=LABEL_SIZE)
    return fig, ax


def _panels(ax, k, ncols, panel, margin, what):  # -> (fig, flat list of axes, ncols)
    """A grid of k panels (at most 4 per row unless ncols is given), or the caller's axes."""
    if ax is None:
        ncols = ncols or min(k, 4)
        nrows = -(-k // ncols)
        fig, grid = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                                 figsize=(panel[0] * ncols + margin[0], panel[1] * nrows + margin[1]))
        return fig, list(grid.ravel()), ncols
    all_axes = list(np.ravel(ax))
    if len(all_axes) < k:
        raise ValueError(f"need {k} axes for {k} {what}, got {len(all_axes)}")
    return all_axes[0].figure, all_axes, ncols or len(all_axes)


def head_grid(weights, labels=None, *, k_labels=None, ncols=None, titles=None, ax=None,
              suptitle=None, vmax=None, mask=None, xlabel=None, ylabel=None):
    """One heatmap per head for weights of shape (h, n_q, n_k), on a shared 0…vmax colour scale.

    labels: the query tokens (also the keys unless k_labels is given); shown on the
    left column and bottom row. ax: optional sequence of at least h axes to draw on.
    mask: optional boolean (n_q, n_k) or (h, n_q, n_k), True = may attend; hidden pairs are
    drawn grey (OFF_COLOR, as in mask_gallery), so they differ from allowed pairs whose weight is near 0 (white).
    xlabel, ylabel: axis titles for the bottom row and left column (e.g. "key", "query").
    Returns (fig, axes) with axes a flat list of the h panels used.
    """
    w = _as_np(weights, 3, "weights (h, n_q, n_k)").astype(np.float64)
    h, n_q, n_k = w.shape
    k_labels = labels if k_labels is None else k_labels
    cols = ncols or min(h, 4)  # as _panels lays them out; the figure stays within MAX_FIGURE_INCHES
    side = min(1.2 + 0.32 * max(n_k, 6), (MAX_FIGURE_INCHES - 1.8) / cols, (MAX_FIGURE_INCHES - 1.0) / -(-h // cols))
    fig, all_axes, ncols = _panels(ax, h, ncols, (side, side), (1.8, 1.0), "heads")
    vmax = float(w.max()) if vmax is None else vmax
    used = all_axes[:h]
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=OFF_COLOR)  # masked cells: grey
    hidden = None if mask is None else ~np.broadcast_to(_as_np(mask, None).astype(bool), w.shape)
    for i, a in enumerate(used):
        wi = w[i] if hidden is None else np.ma.masked_where(hidden[i], w[i])
        im = a.imshow(wi, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
        first_col, last_row = i % ncols == 0, i + ncols >= h
        _label_ticks(a, labels if first_col else None, k_labels if last_row else None, n_q, n_k)
        if not first_col or labels is None:
            a.set_yticks([])
        if not last_row or k_labels is None:
            a.set_xticks([])
        style_axes(a, titles[i] if titles is not None else f"head {i}", xlabel if last_row else None,
                   ylabel if first_col else None)
    for a in all_axes[h:]:
        a.axis("off")
    cb = fig.colorbar(im, ax=used, fraction=0.03, pad=0.02)
    cb.ax.tick_params(labelsize=TICK_SIZE)
    cb.set_label("weight", fontsize=LABEL_SIZE)
    if hidden is not None:
        from matplotlib.patches import Patch
        fig.legend(handles=[Patch(color=OFF_COLOR, label="hidden by the mask (weight 0)")],
                   loc="outside lower center", fontsize=LABEL_SIZE, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, used


# ---------------------------------------------------------------- masks and tiles

_MASK_CMAP = ListedColormap([OFF_COLOR, ON_COLOR])
_BINARY_NORM = BoundaryNorm([-0.5, 0.5, 1.5], 2)


def mask_gallery(masks: dict, *, ncols=None, ax=None, suptitle=None, labels=None):
    """Draw boolean (n_q, n_k) masks side by side: dark = may attend, grey = hidden.

    Each panel's title gives the mask's name, its attended pairs (the cost of
    attention under it) and the density pairs / (n_q·n_k).
    labels: token labels for square masks, one list for all panels or {name: list}.
    Returns (fig, axes), one panel per mask, in the dict's order.
    """
    names = list(masks)
    k = len(names)
    fig, all_axes, ncols = _panels(ax, k, ncols, (4.0, 4.9), (0.0, 1.0), "masks")
    for a, name in zip(all_axes, names):
        m = _as_np(masks[name], None)
        m = m.reshape(m.shape[-2:]) if m.ndim > 2 and m.size == m.shape[-2] * m.shape[-1] else m
        if m.ndim != 2 or m.dtype != bool:
            raise ValueError(f"mask {name!r} must be a 2-D boolean array, got {m.dtype} {m.shape}")
        pairs = int(m.sum())
        a.imshow(m.astype(np.int8), cmap=_MASK_CMAP, norm=_BINARY_NORM, interpolation="nearest")
        n_q, n_k = m.shape
        lab = labels.get(name) if isinstance(labels, dict) else labels
        if lab is not None and n_q == n_k == len(lab):
            _label_ticks(a, lab, lab, n_q, n_k)
        else:
            a.set_xticks([]), a.set_yticks([])
        density = pairs / m.size
        share = f"{density:.0%}" if density >= 0.01 or pairs == 0 else f"{density:.1%}"  # never a bare "0%"
        style_axes(a, f"{name}\n{pairs} pair{'' if pairs == 1 else 's'} ({share})", "key", "query")
    for a in all_axes[k:]:
        a.axis("off")
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=ON_COLOR, label="may attend"), Patch(color=OFF_COLOR, label="hidden")],
               loc="outside lower center", ncols=2, fontsize=LABEL_SIZE, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, all_axes[:k]


def tile_schedule(computed, ax=None, *, partial=None, Br=None, Bc=None, order=False,
                  title=None):
    """FlashAttention's tile grid (Tr query blocks × Tc key blocks): which tiles are computed.

    computed: boolean (Tr, Tc), True = tile of S = Q_i K_jᵀ is computed, False = skipped
    (e.g. above a causal diagonal). partial: optional boolean (Tr, Tc), tiles computed
    with a mask inside them. order numbers the computed tiles in visit order: "rows"
    (or True) for FlashAttention-2's loop (outer over query blocks i), "columns" for
    FlashAttention-1's (outer over key blocks j).
    Returns (fig, ax); ax.images[0] holds 0 = skipped, 1 = computed, 2 = partial.
    """
    c = _as_np(computed, 2, "computed (Tr, Tc)").astype(bool)
    state = c.astype(np.int8)
    if partial is not None:
        p = _as_np(partial, 2, "partial").astype(bool)
        if p.shape != c.shape or np.any(p & ~c):
            raise ValueError("partial must have computed's shape and mark only computed tiles")
        state[p] = 2
    Tr, Tc = c.shape
    fig, ax = _own_axes(ax, figsize=(2.8 + 0.7 * max(Tc, 4), 1.8 + 0.7 * max(Tr, 4)))
    cmap = ListedColormap([OFF_COLOR, ON_COLOR, PARTIAL_COLOR])
    ax.imshow(state, cmap=cmap, norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5], 3), interpolation="nearest")
    ax.set_xticks(np.arange(-0.5, Tc, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, Tr, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_xticks(range(Tc))
    ax.set_yticks(range(Tr))
    if order not in (False, True, "rows", "columns"):
        raise ValueError(f"order must be False, 'rows' or 'columns', got {order!r}")
    if order:
        rows, cols = np.nonzero(c) if order in (True, "rows") else np.nonzero(c.T)[::-1]
        for k, (i, j) in enumerate(zip(rows, cols)):
            ax.text(j, i, str(k + 1), ha="center", va="center", fontsize=ANNOT_SIZE + 1,
                    color="white" if state[i, j] == 1 else "black")
    xl = "key block j" + (f"  (B_c = {Bc} keys)" if Bc else "")
    yl = "query block i" + (f"  (B_r = {Br} queries)" if Br else "")
    n_done = int(c.sum())
    title = title if title is not None else f"{n_done} of {c.size} tiles computed"
    style_axes(ax, title, xl, yl)
    from matplotlib.patches import Patch
    handles = [Patch(color=ON_COLOR, label="computed"), Patch(color=OFF_COLOR, label="skipped")]
    if partial is not None:
        handles.insert(1, Patch(color=PARTIAL_COLOR, label="computed, masked inside"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=TICK_SIZE,
              frameon=False)
    return fig, ax


# ---------------------------------------------------------------- curves and traces

def curves(x, formulas=None, measured=None, *, x_measured=None, ax=None, title=None,
           xlabel="n (sequence length)", ylabel=None, logx=True, logy=True, styles=None,
           measured_label="measured"):
    """Formula lines and measured points on the same axes (log–log by default).

    formulas: {label: y}, y an array over x, drawn as lines.
    measured: {label: y}, y over x_measured (default x), drawn as markers; a measured
    series with the same label as a formula gets the formula's colour and shares its
    legend entry, so a learner sees the points sit on their line.
    styles: optional {label: dict of matplotlib keyword arguments} (e.g. linestyle).
    Returns (fig, ax).
    """
    fig, ax = _own_axes(ax, figsize=(8.5, 5.5))
    x = _as_np(x, 1, "x")
    xm = x if x_measured is None else _as_np(x_measured, 1, "x_measured")
    styles = styles or {}
    colours = {}
    from matplotlib.lines import Line2D
    handles = []
    measured = measured or {}
    for k, (label, y) in enumerate((formulas or {}).items()):
        colours[label] = LINE_COLORS[k % len(LINE_COLORS)]
        kw = dict(color=colours[label], linewidth=2.5)
        kw.update(styles.get(label, {}))
        ax.plot(x, _as_np(y, 1, label), label=label, **kw)
        if label in measured:  # one legend entry: the line with its dot on it
            kw.update(marker="o", markersize=8, markeredgecolor="black", markeredgewidth=0.8)
        handles.append(Line2D([], [], label=label, **kw))
    k0 = len(colours)
    shared = False
    for k, (label, y) in enumerate(measured.items()):
        col = colours.get(label, LINE_COLORS[(k0 + k) % len(LINE_COLORS)])
        kw = dict(color=col, marker="o", markersize=8, linestyle="none",
                  markeredgecolor="black", markeredgewidth=0.8)
        kw.update(styles.get(label, {}) if label not in colours else {})
        ax.plot(xm, _as_np(y, 1, label), label=f"{label} ({measured_label})" if label in colours else label, **kw)
        if label in colours:
            shared = True
        else:
            handles.append(Line2D([], [], label=label, **kw))
    if shared:
        handles.append(Line2D([], [], color="grey", marker="o", markersize=8, linestyle="none",
                              markeredgecolor="black", label=f"dots: {measured_label}, lines: formula"))
    if logx:
        ax.set_xscale("log", base=2 if np.all(np.log2(x) % 1 == 0) else 10)
    if logy:
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        if hi / lo < 100:  # under two decades: plain numbers read better than 3×10¹ on minor ticks
            from matplotlib.ticker import FuncFormatter
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(  # label only the 2s, 3s and 5s of each decade
                lambda v, _: f"{v:g}" if v > 0 and round(v / 10 ** np.floor(np.log10(v))) in (2, 3, 5) else ""))
    style_axes(ax, title, xlabel, ylabel, grid=True)
    ax.legend(handles=handles, fontsize=TICK_SIZE, frameon=False)
    return fig, ax


def online_softmax_trace(m_history, l_history, ax=None, *, scores=None, true_max=None,
                         true_sum=None, xlabel="key block j", title="Online softmax"):
    """The running statistics of online softmax, one step per key block.

    m_history: running maximum m_j after block j, shape (T,) or (T, rows).
    l_history: running normaliser l_j = Σ exp(s - m_j) after block j, same shape.
    scores: optional list of the T blocks' scores (each (B_c,) or (rows, B_c)) drawn as dots.
    true_max / true_sum: the full-row max and normaliser, drawn dashed: the last step must reach them.
    ax: optional pair of axes (top: m, bottom: l). Returns (fig, (ax_m, ax_l)).
    """
    m = _as_np(m_history).astype(np.float64)
    l = _as_np(l_history).astype(np.float64)
    if m.shape != l.shape or m.ndim not in (1, 2):
        raise ValueError(f"m_history {m.shape} and l_history {l.shape} must share a (T,) or (T, rows) shape")
    m2, l2 = (m[:, None], l[:, None]) if m.ndim == 1 else (m, l)
    T, rows = m2.shape
    if ax is None:
        fig, (ax_m, ax_l) = plt.subplots(2, 1, figsize=(8.5, 7.5), sharex=True, layout="constrained")
    else:
        ax_m, ax_l = ax
        fig = ax_m.figure
    steps = np.arange(T)
    for r in range(rows):
        col = LINE_COLORS[r % len(LINE_COLORS)]
        lab = f"row {r}" if rows > 1 else None
        ax_m.plot(steps, m2[:, r], marker="o", color=col, linewidth=2.5, label=lab, drawstyle="steps-post")
        ax_l.plot(steps, l2[:, r], marker="o", color=col, linewidth=2.5, label=lab)
    if scores is not None:
        for j, s in enumerate(scores):
            s = np.ravel(_as_np(s))
            ax_m.plot(np.full(s.shape, j), s, ".", color="grey", alpha=0.6, markersize=7, zorder=3,
                      label="scores in block" if j == 0 else None)  # on top: a score equal to the max stays visible
    for a, ref, name in ((ax_m, true_max, "max of the whole row"), (ax_l, true_sum, "full-row Σ exp(s − max)")):
        if ref is not None:
            for k, val in enumerate(np.ravel(_as_np(ref))):
                a.axhline(val, color="black", linestyle="--", linewidth=1.5, label=name if k == 0 else None)
    style_axes(ax_m, title, None, "running max  m_j", grid=True)
    style_axes(ax_l, None, xlabel, "running sum  l_j", grid=True)
    ax_l.set_xticks(steps)
    for a in (ax_m, ax_l):
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=TICK_SIZE, frameon=False, loc="best")
    return fig, (ax_m, ax_l)


def next_token_bars(tokens, probs, ax=None, *, top_k=10, title="Next-token probabilities",
                    highlight=None):
    """Horizontal bars of the top_k most probable next tokens, most probable at the top.

    tokens: the candidate strings (spaces shown as '␣'); probs: their probabilities.
    highlight: a token to colour differently (e.g. the one greedy decoding picks).
    Returns (fig, ax); the bars run top to bottom in decreasing probability.
    """
    p = _as_np(probs, 1, "probs").astype(np.float64)
    if len(tokens) != p.shape[0]:
        raise ValueError(f"{len(tokens)} tokens for {p.shape[0]} probabilities")
    order = np.argsort(-p, kind="stable")[:top_k]
    toks = [tokens[i] for i in order]
    vals = p[order]
    fig, ax = _own_axes(ax, figsize=(8.0, 1.2 + 0.45 * len(order)))
    y = np.arange(len(order))[::-1]  # most probable on top
    colours = [LINE_COLORS[1] if (highlight is not None and t == highlight) else ON_COLOR for t in toks]
    ax.barh(y, vals, color=colours)
    ax.set_yticks(y)
    ax.set_yticklabels([visible_token(t) for t in toks], fontfamily="monospace")
    for yi, v in zip(y, vals):
        ax.text(v + 0.01 * max(vals.max(), 1e-9), yi, f"{v:.3f}", va="center", fontsize=ANNOT_SIZE + 1)
    ax.set_xlim(0, vals.max() * 1.18 if vals.size else 1)
    style_axes(ax, title, "probability", None)
    return fig, ax


# ---------------------------------------------------------------- saving

class SavedPath(type(Path())):
    """The path `save` wrote: a Path that a notebook does not echo when it is a cell's last value (a lesson's
    figure cell ends with `P.save(…)`; the figure is what the reader should see, not the build machine's path)."""

    def _ipython_display_(self) -> None:
        pass


def save(fig, path, *, dpi=DPI, close=None, colors=None) -> Path:
    """Write fig as a reproducible PNG and return its path (another suffix, e.g. .pdf or
    .svg, is written in its own format by matplotlib, without the PNG-only options).

    The folder is created; the PNG has a fixed dpi, a tight bounding box and no
    "Software" metadata chunk (which would carry the matplotlib version), so the same
    figure gives the same bytes. colors=N stores it with a palette of at most N colours:
    for figures of many flat cells and labels, a fraction of the bytes. close=None closes
    the figure under the headless Agg backend (scripts) and leaves it open elsewhere (a
    notebook still shows it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower().lstrip(".") or None  # None: matplotlib's default format

    def write(f):  # into the new file beside path (files.write_atomic: never through a link, never half a figure)
        if suffix != "png":
            fig.savefig(f, dpi=dpi, bbox_inches="tight", format=suffix)  # the format is the suffix's
        elif colors is None:
            fig.savefig(f, dpi=dpi, bbox_inches="tight", metadata={"Software": None}, format="png")
        else:
            from PIL import Image  # matplotlib's own dependency

            buffer = io.BytesIO()
            fig.savefig(buffer, dpi=dpi, bbox_inches="tight", format="png")
            rgb = Image.open(buffer).convert("RGB")
            rgb.quantize(colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
                f, format="PNG", optimize=True, dpi=(dpi, dpi))

    write_atomic(path, write)
    if close is None:
        close = matplotlib.get_backend().lower() == "agg"
    if close:
        plt.close(fig)
    return SavedPath(path)
