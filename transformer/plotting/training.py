"""Drawing helpers of lessons 18–19: one training step, and training from scratch.

Each function takes plain arrays (the lesson computes them with the package), draws on its own
figure and returns (fig, axes); the lesson saves with plotting.save. Nothing here trains or
imports the package's models.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .base import curves
from .style import LABEL_SIZE, LINE_COLORS, OFF_COLOR, ON_COLOR, TICK_SIZE, TITLE_SIZE, WEIGHTS_CMAP, style_axes

__all__ = ["activation_memory", "adamw_vs_sgd", "training_curves", "heads_over_training", "packing_comparison",
           "runs_compared"]


# ---------------------------------------------------------------- lesson 18: one step
def activation_memory(n, formulas: dict, measured: dict, breakdown: dict, *, n_measured, n_breakdown: int,
                      suptitle=None):
    """Left: bytes kept for the backward over n, formula lines and measured dots (P.curves).
    Right: what those bytes are at n = n_breakdown, one stacked bar per attention kind.

    formulas: {label: bytes over n}; measured: {label: bytes over n_measured};
    breakdown: {bar label: {part: bytes}}.
    """
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(16, 6.2), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.35, 1]})
    curves(n, formulas, measured, x_measured=n_measured, ax=ax0, title="Activations kept for the backward pass",
           ylabel="bytes (float32)", measured_label="measured: sum of .nbytes of saved")
    bars = list(breakdown)
    parts = list(dict.fromkeys(p for b in bars for p in breakdown[b]))
    bottom = np.zeros(len(bars))
    for k, part in enumerate(parts):
        mb = np.array([breakdown[b].get(part, 0) for b in bars]) / 2**20  # MiB
        ax1.bar(bars, mb, bottom=bottom, color=LINE_COLORS[k % len(LINE_COLORS)], label=part, edgecolor="white")
        bottom += mb
    for i, total in enumerate(bottom):
        ax1.text(i, total * 1.01, f"{total:.1f} MiB", ha="center", va="bottom", fontsize=LABEL_SIZE)
    ax1.set_ylim(0, bottom.max() * 1.12)
    ax1.legend(fontsize=TICK_SIZE, frameon=False, loc="upper right")
    style_axes(ax1, f"What is kept, at n = {n_breakdown}", None, "MiB")
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, (ax0, ax1)


def adamw_vs_sgd(g, update_adamw, update_sgd, *, lr: float, name: str, eps: float = 1e-8):
    """The first update of one weight matrix against its gradient, both on log scales: AdamW moves
    every weight by about lr whatever the size of its gradient (m̂/(√v̂ + ε) = g/(|g| + ε) at step 1),
    SGD with the same lr by lr · |g|."""
    g, ua, us = (np.abs(np.ravel(np.asarray(a, dtype=np.float64))) for a in (g, update_adamw, update_sgd))
    keep = g > 0
    fig, ax = plt.subplots(figsize=(9.5, 6), layout="constrained")
    ax.scatter(g[keep], ua[keep] / lr, s=7, color=LINE_COLORS[1], alpha=0.5,
               label="AdamW, step 1: |Δθ| = η·|g| / (|g| + ε)")
    ax.scatter(g[keep], us[keep] / lr, s=7, color=LINE_COLORS[0], alpha=0.5, label="SGD: |Δθ| = η·|g|")
    ax.axvline(eps, color="grey", lw=0.8, ls="--")
    ax.text(eps, 2e-2, " ε", ha="left", fontsize=LABEL_SIZE, color="grey")
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.legend(fontsize=LABEL_SIZE, frameon=False, markerscale=3, loc="center right")
    style_axes(ax, f"The first update of {name}, one dot per weight", "|gradient g|",
               "|update Δθ| / η  (the same η for both)", grid=True)
    return fig, ax


# ---------------------------------------------------------------- lesson 19: training from scratch
def training_curves(loss, snap_steps, accuracy, scores: dict, *, chance: float, marks=(), title=None):
    """Top: the loss of every step, with the chance level ln(v − 1). Bottom: held-out accuracy and
    the two heads' scores at the snapshots. marks: (step, label) drawn as vertical lines on both."""
    loss = np.asarray(loss, dtype=np.float64)
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(12, 8.5), sharex=True, layout="constrained",
                                   gridspec_kw={"height_ratios": [1.2, 1]})
    steps = np.arange(1, len(loss) + 1)
    ax0.plot(steps, loss, color=LINE_COLORS[0], lw=1.2, label="training loss (one batch per step)")
    ax0.axhline(chance, color="grey", ls="--", lw=1)
    ax0.text(0.62 * len(loss), chance, f"chance: ln 31 = {chance:.2f}", ha="center", va="bottom",
             fontsize=LABEL_SIZE, color="grey")
    ax0.set_ylim(0, max(loss.max(), chance) * 1.08)
    ax0.legend(fontsize=LABEL_SIZE, frameon=False, loc="center right")
    style_axes(ax0, title, None, "cross-entropy (nats)", grid=True)
    ax1.plot(snap_steps, accuracy, color="black", lw=2.2, marker="o", ms=4, label="held-out accuracy")
    for k, (label, y) in enumerate(scores.items()):
        ax1.plot(snap_steps, y, color=LINE_COLORS[k + 1], lw=2, marker="s", ms=3.5, label=label)
    ax1.set_ylim(0, 1.05)
    ax1.legend(fontsize=LABEL_SIZE, frameon=False, loc="lower right")
    style_axes(ax1, None, "training step", "accuracy / head score", grid=True)
    for step, label in marks:
        for ax in (ax0, ax1):
            ax.axvline(step, color="#888888", lw=1, ls=":")
        ax0.text(step, ax0.get_ylim()[1] * 0.98, label, ha="center", va="top", fontsize=LABEL_SIZE,
                 bbox=dict(facecolor="white", edgecolor="#888888", boxstyle="round,pad=0.2"))
    return fig, (ax0, ax1)


def heads_over_training(maps, steps, head_names, tokens, *, targets: dict, scores=None, score_names=None,
                        col_titles=None, suptitle=None, mask=None):
    """A grid of attention maps: a row per head, a column per snapshot. maps: [k, heads, n, n];
    tokens: the n token ids, written under the key positions of the bottom row.
    targets: {row: [(query, key), …]} cells to outline (where that kind of head should look).
    scores: optional [k, heads] numbers written under each panel's title, named score_names[row].
    mask: optional boolean (n, n), True = may attend: hidden cells are drawn grey, not white."""
    W = np.asarray(maps, dtype=np.float64)
    k, rows, n, _ = W.shape
    hidden = np.zeros((n, n), bool) if mask is None else ~np.broadcast_to(np.asarray(mask, bool), (n, n))
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=OFF_COLOR)  # hidden cells: grey
    side = 3.1
    fig, axes = plt.subplots(rows, k, figsize=(side * k + 1.6, side * rows + 1.2), squeeze=False, layout="constrained")
    labels = [str(t) for t in tokens]
    step = max(1, n // 8)  # a tick every `step` positions
    for r in range(rows):
        for c in range(k):
            ax = axes[r, c]
            im = ax.imshow(np.ma.masked_where(hidden, W[c, r]), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
            for q, key in targets.get(r, ()):
                ax.add_patch(Rectangle((key - 0.5, q - 0.5), 1, 1, fill=False, edgecolor="#d62728", lw=0.9))
            ax.set_xticks([]), ax.set_yticks([])
            title = (col_titles[c] if col_titles is not None and r == 0 else "")
            if scores is not None:
                what = score_names[r] if score_names is not None else "score"
                title += ("\n" if title else "") + f"{what} {scores[c][r]:.2f}"
            ax.set_title(title, fontsize=TICK_SIZE + 1)
            if c == 0:
                ax.set_yticks(range(0, n, step), [str(i) for i in range(0, n, step)], fontsize=TICK_SIZE - 2)
                ax.set_ylabel(f"{head_names[r]}\nquery position", fontsize=LABEL_SIZE)
    for ax in axes[-1]:
        ax.set_xticks(range(0, n, step), [f"{i}\n({labels[i]})" for i in range(0, n, step)], fontsize=TICK_SIZE - 2)
        ax.set_xlabel("key position (token id)", fontsize=TICK_SIZE)
    cb = fig.colorbar(im, ax=axes, fraction=0.02, pad=0.01)
    cb.set_label("weight", fontsize=LABEL_SIZE)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes


def packing_comparison(loss: dict, slots: dict, *, suptitle=None):
    """Left: the loss per step of each layout. Right: their slots over the run, real tokens and
    padding. loss: {layout: [steps]}; slots: {layout: (tokens, padded_slots)}."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(16, 5.8), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.5, 1]})
    for k, (name, y) in enumerate(loss.items()):
        ax0.plot(np.arange(1, len(y) + 1), y, color=LINE_COLORS[k], lw=1.3 if k == 0 else 1.0,
                 ls="-" if k == 0 else "--", label=name)
    ax0.legend(fontsize=LABEL_SIZE, frameon=False)
    style_axes(ax0, "Training loss: the same documents, two layouts", "training step", "cross-entropy (nats)",
               grid=True)
    names = list(slots)
    tokens = np.array([slots[s][0] for s in names], dtype=np.float64) / 1e3
    pads = np.array([slots[s][1] for s in names], dtype=np.float64) / 1e3
    ax1.bar(names, tokens, color=ON_COLOR, label="real tokens")
    ax1.bar(names, pads, bottom=tokens, color=OFF_COLOR, edgecolor="#999999", label="padding")
    for i in range(len(names)):
        share = pads[i] / (tokens[i] + pads[i])
        ax1.text(i, tokens[i] + pads[i], f"{pads[i]:,.0f}k padded\n({share:.0%} of slots)", ha="center",
                 va="bottom", fontsize=LABEL_SIZE)
    ax1.set_ylim(0, (tokens + pads).max() * 1.22)
    ax1.legend(fontsize=LABEL_SIZE, frameon=False, loc="upper right")
    style_axes(ax1, "Slots over the whole run", None, "thousands of slots")
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, (ax0, ax1)


# ---------------------------------------------------------------- lessons 15 and 19: a run and its control
def runs_compared(loss: dict, accuracy: dict | None = None, *, levels: dict | None = None, accuracy_label=
                  "held-out accuracy", suptitle=None, smooth: int = 20):
    """Runs side by side. Left: each run's loss per step (faint) and its mean over `smooth` steps.
    Right (if accuracy): each run's held-out accuracy at its snapshots.
    loss: {run: [steps]}; accuracy: {run: (snapshot steps, accuracy)}, same runs, same colours;
    levels: {label: loss} horizontal dashed lines on the left (a chance level, a floor)."""
    fig, axes = plt.subplots(1, 2 if accuracy else 1, figsize=(16 if accuracy else 10, 5.8), layout="constrained",
                             squeeze=False)
    ax0 = axes[0, 0]
    for k, (name, y) in enumerate(loss.items()):
        y = np.asarray(y, dtype=np.float64)
        steps = np.arange(1, len(y) + 1)
        ax0.plot(steps, y, color=LINE_COLORS[k], lw=0.8, alpha=0.3)
        w = min(smooth, len(y))
        ax0.plot(steps[w - 1:], np.convolve(y, np.ones(w) / w, mode="valid"), color=LINE_COLORS[k], lw=2.2,
                 label=f"{name} (mean of {w} steps)")
    for j, (label, level) in enumerate((levels or {}).items()):
        ax0.axhline(level, color="grey", ls="--" if j == 0 else ":", lw=1.2, label=label)
    ax0.set_ylim(0, None)
    ax0.legend(fontsize=LABEL_SIZE, frameon=False, loc="best")
    style_axes(ax0, "Training loss", "training step", "cross-entropy (nats)", grid=True)
    if accuracy:
        ax1 = axes[0, 1]
        for k, (name, (steps, acc)) in enumerate(accuracy.items()):
            ax1.plot(steps, acc, color=LINE_COLORS[k], lw=2.2, marker="o", ms=3.5, label=f"{name}: {acc[-1]:.1%}")
        ax1.set_ylim(0, 1.05)
        ax1.legend(fontsize=LABEL_SIZE, frameon=False, loc="center right")
        style_axes(ax1, accuracy_label.capitalize(), "training step", accuracy_label, grid=True)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, list(axes.ravel())
