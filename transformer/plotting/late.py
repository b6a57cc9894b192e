"""Drawing helpers of lessons 09–17: the long figure code, so a lesson's cells show the concept.

Each function draws on the axes it is given (or makes its own figure), returns (fig, ax) or
(fig, axes) and never calls plt.show(); the lesson saves with plotting.save.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle, FancyBboxPatch

from .base import tile_schedule
from .early import style_axes
from .style import LABEL_SIZE, LINE_COLORS, OFF_COLOR, ON_COLOR, PARTIAL_COLOR, TICK_SIZE, TITLE_SIZE, WEIGHTS_CMAP

__all__ = ["block_wiring", "head_kinds", "induction_and_decode", "mask_panels", "mma_lanes", "packing_errors", "shared_memory_bars", "gpu_timings", "launch_bound", "tile_states", "visit_order"]

TRUNK_COLOR = "#555555"  # the residual stream
NORM_COLOR, ATTN_COLOR, FFN_COLOR = "#fde9b8", "#cfe2f3", "#d9ead3"  # box fills: norm, attention, FFN


def own_axes(ax, **kw):  # -> (fig, ax): ax's figure, or a new figure
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(**kw)
    return fig, ax


# ---------------------------------------------------------------- lesson 10: the block, two wirings
def box(ax, cx, cy, text, fill, *, w=3.6, h=1.0, size=LABEL_SIZE):
    """A rounded box centred at (cx, cy) with its label."""
    ax.add_patch(FancyBboxPatch((cx - w / 2, cy - h / 2), w, h, boxstyle="round,pad=0.05,rounding_size=0.15",
                                facecolor=fill, edgecolor="black", linewidth=1.2, zorder=3))
    ax.text(cx, cy, text, ha="center", va="center", fontsize=size, zorder=4)


def arrow(ax, p0, p1, *, color="black", width=1.6, head=True):
    ax.annotate("", xy=p1, xytext=p0, zorder=2,
                arrowprops=dict(arrowstyle="-|>" if head else "-", color=color, linewidth=width,
                                shrinkA=0, shrinkB=0, mutation_scale=16))


def shape_label(ax, x, y, text, *, ha="left", color="black"):
    ax.text(x, y, text, ha=ha, va="center", fontsize=TICK_SIZE, family="monospace", color=color, zorder=4)


def plus(ax, x, y):  # the residual addition ⊕ on the trunk
    ax.add_patch(Circle((x, y), 0.32, facecolor="white", edgecolor="black", linewidth=1.5, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=LABEL_SIZE + 3, zorder=4)


def one_wiring(ax, *, pre_norm, norm, sublayers, title, out_note):
    """One block: the trunk at x = 2.5 going up, each sub-layer a branch to its right and back."""
    tx, bx = 2.5, 7.2  # trunk and branch columns
    trunk = dict(color=TRUNK_COLOR, width=4.5)
    y = 0.0
    shape_label(ax, tx + 0.25, y + 0.55, "x  (b, n, d)")
    for name, inner, fill in sublayers:
        fork = y + 1.1
        arrow(ax, (tx, y), (tx, fork), head=False, **trunk)
        arrow(ax, (tx, fork), (bx, fork), head=False)  # the branch leaves the trunk
        top = fork
        if pre_norm:  # Norm on the branch only
            arrow(ax, (bx, top), (bx, top + 0.6))
            box(ax, bx, top + 1.1, norm, NORM_COLOR)
            top += 1.6
        arrow(ax, (bx, top), (bx, top + 0.6))
        shape_label(ax, bx + 0.15, top + 0.35, "(b, n, d)")
        box(ax, bx, top + 1.35, f"{name}\n{inner}", fill, w=4.4, h=1.5, size=TICK_SIZE + 1)
        top += 2.1
        join = top + 0.8
        arrow(ax, (bx, top), (bx, join), head=False)
        arrow(ax, (bx, join), (tx + 0.32, join))  # back into the trunk
        shape_label(ax, (tx + bx) / 2, join + 0.3, "(b, n, d)", ha="center")
        arrow(ax, (tx, fork), (tx, join - 0.32), **trunk)  # the residual: x itself, untouched
        plus(ax, tx, join)
        y = join + 0.32
        if not pre_norm:  # LayerNorm on the trunk, after the sum
            arrow(ax, (tx, y), (tx, y + 0.5), **trunk)
            box(ax, tx, y + 1.0, norm, NORM_COLOR, w=3.0)
            y += 1.5
    arrow(ax, (tx, y), (tx, y + 1.0), **trunk)
    shape_label(ax, tx + 0.25, y + 0.55, "x'  (b, n, d)")
    ax.text(tx, y + 1.35, out_note, ha="center", va="bottom", fontsize=TICK_SIZE + 1, style="italic")
    ax.text(tx - 1.9, y / 2, "residual stream", rotation=90, ha="center", va="center", fontsize=LABEL_SIZE,
            color=TRUNK_COLOR, fontweight="bold")
    ax.set_xlim(-0.6, 10.2)
    ax.set_ylim(-0.4, y + 2.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=TITLE_SIZE)
    return y


def block_wiring(axes=None):
    """Post-norm (2017) and pre-norm (Llama) blocks side by side, residual stream as the trunk,
    shapes on the arrows. -> (fig, axes)"""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(15, 10.5), layout="constrained")
    fig = axes[0].figure
    one_wiring(axes[0], pre_norm=False, norm="LayerNorm",
               sublayers=[("multi-head attention", "Q, K, V: (b, h, n, d_h)", ATTN_COLOR),
                          ("FFN  max(0, xW₁)W₂", "hidden (b, n, d_ff)", FFN_COLOR)],
               title="post-norm (2017): x ← LN(x + f(x))",
               out_note="the stream is renormalised after every sub-layer")
    one_wiring(axes[1], pre_norm=True, norm="RMSNorm",
               sublayers=[("causal attention, RoPE, GQA", "Q (b, h, n, d_h)\nK, V (b, h_kv, n, d_h)", ATTN_COLOR),
                          ("SwiGLU FFN", "hidden (b, n, d_ff)", FFN_COLOR)],
               title="pre-norm (Llama): x ← x + f(Norm(x))",
               out_note="the stream is a running sum; one final\nRMSNorm before the LM head")
    return fig, axes


# ---------------------------------------------------------------- lesson 11: where each kind of head lives
def head_kinds(scores: dict, axes=None, *, threshold=0.4):
    """One panel per kind of head: a layers × heads map of its score in [0, 1] (row = layer,
    top = layer 0); cells at or above `threshold` carry their value. -> (fig, axes)"""
    k = len(scores)
    if axes is None:
        fig, axes = plt.subplots(1, k, figsize=(5.2 * k + 1.5, 10), layout="constrained", squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    for a, (title, s) in zip(axes, scores.items()):
        s = np.asarray(s, dtype=np.float64)  # (L, h)
        im = a.imshow(s, cmap=WEIGHTS_CMAP, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        for (l_, h_), val in np.ndenumerate(s):
            if val >= threshold:
                a.text(h_, l_, f"{val:.2f}", ha="center", va="center", fontsize=TICK_SIZE - 1,
                       color="white" if val > 0.6 else "black")
        a.set_xticks(range(s.shape[1]))
        a.set_yticks(range(0, s.shape[0], 2))
        a.tick_params(labelsize=TICK_SIZE)
        a.set_title(title, fontsize=TITLE_SIZE)
        a.set_xlabel("head", fontsize=LABEL_SIZE)
    axes[0].set_ylabel("layer", fontsize=LABEL_SIZE)
    cb = fig.colorbar(im, ax=list(axes), fraction=0.02, pad=0.01)
    cb.set_label(f"mean attention weight (numbers: ≥ {threshold:g})", fontsize=LABEL_SIZE)
    cb.ax.tick_params(labelsize=TICK_SIZE)
    return fig, axes


def induction_and_decode(W, r, rows, first_key_step, targets, axes=None, *, head_name=""):
    """Left: one head's (n, n) map on a sequence of r random tokens repeated, with the shifted
    diagonal j = i − r + 1 marked. Right: the new token's row at each decode step over the keys
    cached so far (grey: not cached yet), the key an induction head should read outlined.
    rows: list of 1-D weight rows, row s over first_key_step + s + 1 keys. -> (fig, axes)"""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(19, 8.5), layout="constrained", width_ratios=[1, 1.25])
    fig = axes[0].figure
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    shown = np.where(np.tril(np.ones((n, n), dtype=bool)), W, np.nan)  # hidden future: grey
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=OFF_COLOR)
    im = axes[0].imshow(shown, cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    i = np.arange(r, n)
    axes[0].plot(i - r + 1, i, linestyle=(0, (1, 3)), color=LINE_COLORS[1], linewidth=1.5,
                 label="j = i − r + 1: the token after the last occurrence")
    axes[0].axhline(r - 0.5, color="black", linewidth=0.8), axes[0].axvline(r - 0.5, color="black", linewidth=0.8)
    axes[0].legend(loc="upper right", fontsize=TICK_SIZE + 1, frameon=True)
    axes[0].set_title(f"{head_name} on r = {r} random tokens, repeated", fontsize=TITLE_SIZE)
    axes[0].set_xlabel("key j", fontsize=LABEL_SIZE), axes[0].set_ylabel("query i", fontsize=LABEL_SIZE)
    axes[0].tick_params(labelsize=TICK_SIZE)
    steps, n_k = len(rows), first_key_step + len(rows)
    grid = np.full((steps, n_k), np.nan)  # (steps, keys): NaN = not in the cache yet
    for s, row in enumerate(rows):
        grid[s, :row.size] = row
    axes[1].imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for s, j in enumerate(targets):
        axes[1].add_patch(plt.Rectangle((j - 0.5, s - 0.5), 1, 1, fill=False, edgecolor=LINE_COLORS[1], linewidth=2))
    axes[1].set_yticks(range(steps), [f"step {s + 1}" for s in range(steps)])
    axes[1].set_title("decode: the new token's row over the cached keys\n(outlined: the key after its last "
                      "occurrence; grey: not cached yet)", fontsize=TITLE_SIZE)
    axes[1].set_xlabel("cached key position", fontsize=LABEL_SIZE)
    axes[1].tick_params(labelsize=TICK_SIZE)
    cb = fig.colorbar(im, ax=list(axes), fraction=0.02, pad=0.01)
    cb.set_label("weight", fontsize=LABEL_SIZE)
    return fig, axes


# ---------------------------------------------------------------- lesson 12: one head under three masks
def mask_panels(panels, axes=None):
    """One heatmap per (weights (n, n), token labels, keep (n, n) bool or None, title), side by side,
    sharing one colour bar; cells where keep is False are masked and drawn in the grey of every
    mask figure. -> (fig, axes)"""
    if axes is None:
        widths = [len(labels) for _, labels, _, _ in panels]
        fig, axes = plt.subplots(1, len(panels), figsize=(21, 7.5), layout="constrained", width_ratios=widths)
    fig = axes[0].figure
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=OFF_COLOR)  # masked: grey, weight 0: white
    for k, (a, (w, labels, keep, title)) in enumerate(zip(axes, panels)):
        w = np.asarray(w, dtype=np.float64)  # (n, n)
        shown = w if keep is None else np.ma.masked_array(w, mask=~np.asarray(keep, dtype=bool))
        im = a.imshow(shown, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        a.set_xticks(range(len(labels)), labels, rotation=90)
        a.set_yticks(range(len(labels)), labels)
        a.tick_params(labelsize=LABEL_SIZE)
        a.set_title(title, fontsize=TITLE_SIZE)
        a.set_xlabel("key  (attended to)", fontsize=LABEL_SIZE)
        if k == 0:
            a.set_ylabel("query  (attending)", fontsize=LABEL_SIZE)
    cb = fig.colorbar(im, ax=list(axes), fraction=0.02, pad=0.01)
    cb.set_label("weight (grey: masked)", fontsize=LABEL_SIZE)
    cb.ax.tick_params(labelsize=TICK_SIZE)
    return fig, axes


# ---------------------------------------------------------------- lesson 17: one warp's registers
def lane_grid(ax, lanes, cmap, lane, *, title, xlabel, ylabel, split=None):
    """Colour = lane, text = lane number; the cells of `lane` outlined."""
    ax.imshow(lanes, cmap=cmap, vmin=-0.5, vmax=31.5, interpolation="nearest")
    for (i, j), ln in np.ndenumerate(lanes):
        r_, g_, b_ = cmap.colors[ln][:3]
        ink = "black" if 0.3 * r_ + 0.59 * g_ + 0.11 * b_ > 0.6 else "white"  # readable on light and dark cells
        ax.text(j, i, str(ln), ha="center", va="center", fontsize=LABEL_SIZE - 1, color=ink,
                fontweight="bold" if ln == lane else "normal")
        if ln == lane:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=3, zorder=3))
    if split is not None:
        ax.axvline(split - 0.5, color="black", linewidth=2.5)
    ax.set_xticks(range(0, lanes.shape[1], 2))
    ax.set_yticks(range(0, lanes.shape[0], 2))
    ax.tick_params(labelsize=TICK_SIZE)
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)


def mma_lanes(lane_sp, lane_v, *, lane, note):
    """mma.sync.m16n8k16 in one warp: left, the lane holding each score S[i, j] — also the lane
    feeding P̃[i, j] to P̃ V_j (the same layout); right, the lane reading each element of V_j.
    `lane`'s cells outlined; `note` (its registers) written below. -> (fig, axes)"""
    from matplotlib.colors import ListedColormap
    cmap = ListedColormap([c for name in ("tab20b", "tab20c") for c in plt.get_cmap(name).colors][:32])
    fig, axes = plt.subplots(1, 2, figsize=(12, 8.2), layout="constrained", width_ratios=[16, 8])
    lane_grid(axes[0], lane_sp, cmap, lane, title="S = Q K_jᵀ, then P̃: same lane per cell",
              xlabel="key j (8-key tile 0 | tile 1)", ylabel="query row i", split=8)
    lane_grid(axes[1], lane_v, cmap, lane, title="V_j (B operand)", xlabel="column of d_h", ylabel="key j")
    fig.suptitle("mma.sync.m16n8k16: the lane (0–31) of one warp holding each element;\n"
                 "lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1", fontsize=TITLE_SIZE)
    fig.text(0.5, 0.0, note, ha="center", va="bottom", fontsize=LABEL_SIZE, family="monospace")
    fig.get_layout_engine().set(h_pad=0.1, rect=(0, 0.07, 1, 0.93))  # room for the note below
    return fig, axes


def shared_memory_bars(bars, colours, names, limits, *, title, sliver=1024):
    """One stacked bar per kernel: its shared-memory buffers in KiB (hatched: the tile being copied
    in), against the per-block `limits` [(KiB, text)]. Buffers under `sliver` bytes in every bar
    would be invisible: they get no legend entry, a note names them with their sizes. -> (fig, ax)"""
    fig, ax = plt.subplots(figsize=(13, 8.4), layout="constrained")
    largest, smallest = {}, {}
    for y, (label, parts) in enumerate(reversed(bars)):
        left = 0.0
        for buf, nbytes in parts.items():
            ax.barh(y, nbytes / 1024, left=left, color=colours[buf], edgecolor="white",
                    hatch="//" if buf.endswith("+1") else None)
            largest[buf] = max(largest.get(buf, 0), nbytes)
            smallest[buf] = min(smallest.get(buf, nbytes), nbytes)
            left += nbytes / 1024
        ax.text(left + 2, y, f"{left:.0f} KiB", va="center", fontsize=TICK_SIZE)
    for k, (x, text) in enumerate(limits):
        ax.axvline(x, color="grey", linestyle="--", linewidth=1)
        side = "left" if k == 0 else "right"
        ax.text(x + (2 if side == "left" else -2), len(bars) - 0.45, text, fontsize=TICK_SIZE, color="dimgrey",
                va="top", ha=side)
    ax.set_yticks(range(len(bars)), [label for label, _ in reversed(bars)])
    ax.tick_params(labelsize=TICK_SIZE)
    ax.set_xlim(0, 235)
    shown = [b for b in colours if largest.get(b, 0) >= sliver]
    tiny = [b for b in colours if 0 < largest.get(b, 0) < sliver]
    seen, handles, labels = set(), [], []
    for b in shown:  # one entry per name (K_j and K_j+1 share a colour, told apart by the hatch)
        if names.get(b, b) not in seen:
            seen.add(names.get(b, b))
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor=colours[b], edgecolor="white",
                                         hatch="//" if b.endswith("+1") else None))
            labels.append(names.get(b, b))
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=TICK_SIZE, title="buffer")
    if tiny:
        ax.text(1.01, 0.0, "too thin to see, so not\nin the legend:\n"
                + "\n".join(f"  {b}: {smallest[b]}" + (f"–{largest[b]}" if smallest[b] < largest[b] else "")
                             + " B" for b in tiny), transform=ax.transAxes,
                fontsize=TICK_SIZE, va="bottom", ha="left", color="dimgrey")
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.set_xlabel("KiB", fontsize=LABEL_SIZE)
    return fig, ax


# ---------------------------------------------------------------- lesson 16: packed vs alone
def packing_errors(panels, *, suptitle, rounding=1e-4):
    """One bar chart per model, (title, {setting: largest |Δ|}, y label, y top), log scale.
    A value under `rounding` is float32 rounding noise whose digits change with the machine: it is
    drawn as a hatched bar up to `rounding`, labelled "< rounding", so the figure is the same
    on every run. -> (fig, axes)"""
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 6.2), layout="constrained")
    colors = [ON_COLOR, PARTIAL_COLOR, LINE_COLORS[1]]
    tag = f"< {rounding:.0e}".replace("e-0", "e-")  # "< 1e-4"
    for ax, (title, errs, unit, top) in zip(axes, panels):
        ax.axhspan(1e-8, rounding, color=LINE_COLORS[2], alpha=0.1, zorder=0, label=f"float32 rounding ({tag})")
        for k, (name, e) in enumerate(errs.items()):
            tiny = e < rounding
            ax.bar(k, rounding if tiny else e, color=colors[k], zorder=2, hatch="//" if tiny else None,
                   edgecolor="white")
            ax.text(k, (rounding if tiny else e) * 1.6, tag if tiny else f"{e:.2g}", ha="center",
                    fontsize=LABEL_SIZE)
        ax.set_xticks(range(len(errs)), list(errs))
        ax.tick_params(labelsize=TICK_SIZE)
        ax.set_yscale("log")
        ax.set_ylim(1e-8, top)
        ax.set_title(f"{title}\nvs each text run alone", fontsize=TITLE_SIZE)
        ax.set_ylabel(f"{unit} (log scale)", fontsize=LABEL_SIZE)
    axes[0].legend(loc="upper left", fontsize=TICK_SIZE, frameon=False)
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes


# ---------------------------------------------------------------- lesson 17: times and memory on a GPU
def gpu_timings(rows, series, *, device, mib=2.0 ** 20):
    """bench_gpu.py's results: time of one call (top) and extra GPU memory (bottom, dots measured,
    lines by formula) against n, float32 (left) and float16 (right), no mask. `rows` are the
    results' "attention" records, `series` maps a result key to its label. A time longer than at
    twice the length is a warm-up artefact and is marked as one. -> (fig, axes)"""
    colour = dict(zip(series, LINE_COLORS))
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), constrained_layout=True)
    fits = {}  # dtype -> standard attention's measured bytes at the largest n, None: out of memory
    for col, dtype in enumerate(("float32", "float16")):
        rows_g = [r for r in rows if r["dtype"] == dtype and not r["causal"]]
        ns = np.array([r["n"] for r in rows_g])  # [N]
        for key, label in series.items():
            t_ms = np.array([r.get(f"{key}_s") or np.nan for r in rows_g]) * 1e3  # [N]; NaN: not run or out of memory
            if np.isfinite(t_ms).any():
                axes[0, col].plot(ns, t_ms, "o-", color=colour[key], label=label)
            for i in np.nonzero(t_ms[:-1] > t_ms[1:])[0]:  # slower than at twice the length: not the kernel
                axes[0, col].annotate(f"warm-up artefact:\nslower than at n = {ns[i + 1]}", (ns[i], t_ms[i]),
                                      xytext=(2 ** 12.2, 0.11), textcoords="data", fontsize=TICK_SIZE,
                                      color=colour[key], arrowprops=dict(arrowstyle="->", color=colour[key]))
        axes[0, col].set_xscale("log", base=2)
        axes[0, col].set_yscale("log")
        style_axes(axes[0, col], title=f"{dtype}: time of one call", xlabel="n", ylabel="ms", grid=True)
        axes[0, col].legend(fontsize=TICK_SIZE)
        for key, label, formula in (("naive", "standard attention", "naive_peak_formula"),
                                    ("mma" if dtype == "float16" else "mma_tf32", "tiled kernel (O and lse)",
                                     "kernel_peak_formula")):
            measured = np.array([r.get(f"{key}_peak_bytes") or np.nan for r in rows_g]) / mib  # [N]
            axes[1, col].plot(ns, np.array([r[formula] for r in rows_g]) / mib, "-", color=colour[key],
                              label=f"{label}: formula")
            axes[1, col].plot(ns, measured, "o", color=colour[key], label=f"{label}: measured (CuPy pool)")
        torch_mib = np.array([r.get("torch_peak_bytes") or np.nan for r in rows_g]) / mib  # [N]
        axes[1, col].plot(ns, torch_mib, "s", color=colour["torch"], label="torch SDPA: measured", markersize=4)
        axes[1, col].set_xscale("log", base=2)
        axes[1, col].set_yscale("log")
        last = rows_g[-1]
        fits[dtype] = last.get("naive_peak_bytes")  # the largest n: None where standard attention did not fit
        axes[1, col].annotate("out of memory" if fits[dtype] is None else f"ran: {fits[dtype] / mib:,.0f} MiB",
                              (last["n"], last["naive_peak_formula"] / mib), xytext=(-10, 0),
                              textcoords="offset points", ha="right", va="center", fontsize=TICK_SIZE,
                              color=colour["naive"])
        style_axes(axes[1, col], title=f"{dtype}: extra GPU memory of one call", xlabel="n", ylabel="MiB", grid=True)
        axes[1, col].set_ylim(top=1500 * last["naive_peak_formula"] / mib)  # room for the legend above the lines
        axes[1, col].legend(fontsize=TICK_SIZE, loc="upper left")
    fate = {dtype: "ran out of memory" if got is None else "fitted and ran" for dtype, got in fits.items()}
    fig.suptitle(f"On an {device}, at n = {last['n']} standard attention needs "
                 f"{last['naive_peak_formula'] / 2 ** 30:.0f} GiB of scores:\nin float32 it {fate['float32']}, "
                 f"in float16 it {fate['float16']}; the tiled kernels need O(n)", fontsize=TICK_SIZE + 2)
    return fig, axes


def launch_bound(paths, *, bytes_us: float, title: str, measured=()):
    """One decode step's time per token, as its two parts side by side: launching (kernels × the cost of
    one, host time the GPU waits through) and reading the weights once (bytes / bandwidth). paths: (label,
    kernels, µs per kernel) per row; measured: (label, µs a token) rows drawn below them as one bar each,
    the time a run took. Log-scaled µs; every bar carries its number, each path its sum and the tokens/s
    that sum bounds. -> (fig, ax)"""
    def us(x):  # 21.52 -> "21.5", 4.03 -> "4.0", 0.505 -> "0.50", 35751 -> "35,751"
        return f"{x:.2f}" if x < 1 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"

    fig, ax = plt.subplots(figsize=(12, 1.6 + 1.1 * len(paths) + 0.55 * len(measured)), constrained_layout=True)
    ticks, names, right = [], [], max([k * c for _, k, c in paths] + [u for _, u in measured] + [bytes_us])
    for y, (label, kernels, cost) in enumerate(paths):
        launch = kernels * cost  # µs
        ax.barh(y - 0.2, launch, height=0.38, color=LINE_COLORS[1], label="launching the kernels" if y == 0 else None)
        ax.barh(y + 0.2, bytes_us, height=0.38, color=LINE_COLORS[0],
                label="reading the weights once" if y == 0 else None)
        for x, yy, text in ((launch, y - 0.2, f"{kernels:,} × {us(cost)} µs = {us(launch)} µs"),
                            (bytes_us, y + 0.2, f"{us(bytes_us)} µs")):
            ax.annotate(text, (x, yy), xytext=(5, 0), textcoords="offset points", va="center", fontsize=TICK_SIZE)
        total = launch + bytes_us
        ticks.append(y)
        names.append(f"{label}\nsum {us(total)} µs → ≤ {1e6 / total:,.0f} tok/s")
    for y, (label, t) in enumerate(measured, start=len(paths)):
        ax.barh(y, t, height=0.5, color=LINE_COLORS[2], label="measured, one token" if y == len(paths) else None)
        ax.annotate(f"{us(t)} µs → {1e6 / t:,.0f} tok/s", (t, y), xytext=(5, 0), textcoords="offset points",
                    va="center", fontsize=TICK_SIZE)
        ticks.append(y)
        names.append(label)
    ax.set_yticks(ticks, names, fontsize=TICK_SIZE)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(10, 60 * right)  # room for the largest bar's label
    style_axes(ax, title=title, xlabel="µs per token (log scale)")
    ax.legend(fontsize=TICK_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    return fig, ax


# ---------------------------------------------------------------- lesson 09: tiles of the score matrix
MASKED_COLOR = "#d9e8f5"  # inside a diagonal tile: computed, then set to -inf


def tile_states(panels, *, suptitle):
    """One panel per (state, B_r, B_c, title): each score element painted by its tile's fate
    (0 skipped, 1 full, 2 diagonal, 3 masked inside a diagonal tile), white borders at the real
    block boundaries, so a last block shorter than B shows. -> (fig, axes)"""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch
    cmap = ListedColormap([OFF_COLOR, ON_COLOR, PARTIAL_COLOR, MASKED_COLOR])
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 6.6), layout="constrained")
    for a, (state, Br, Bc, title) in zip(axes, panels):
        n = state.shape[0]
        a.imshow(state, cmap=cmap, norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5, 3.5], 4), interpolation="nearest")
        for r in range(0, n + 1, Br):  # tile borders at the real block boundaries
            a.axhline(min(r, n) - 0.5, color="white", linewidth=3)
        for c in range(0, n + 1, Bc):
            a.axvline(min(c, n) - 0.5, color="white", linewidth=3)
        a.axhline(n - 0.5, color="white", linewidth=3), a.axvline(n - 0.5, color="white", linewidth=3)
        a.set_xticks(np.arange(0, n, Bc)), a.set_yticks(np.arange(0, n, Br))
        style_axes(a, title, "key position j", "query position i")
    fig.legend(handles=[Patch(color=ON_COLOR, label="full tile (no mask inside)"),
                        Patch(color=PARTIAL_COLOR, label="diagonal tile: computed …"),
                        Patch(color=MASKED_COLOR, label="… and masked inside"),
                        Patch(color=OFF_COLOR, label="skipped: never loaded")],
               loc="outside lower center", ncols=4, fontsize=LABEL_SIZE, frameon=False)
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    fig.get_layout_engine().set(h_pad=0.12)  # room between the suptitle and the two-line panel titles
    return fig, axes


def visit_order(schedules, *, B, suptitle):
    """One panel per (computed, partial, grid, title): the tile schedule with each computed tile
    numbered by the step that visited it (grid: step or -1) and arrows from tile to tile.
    -> (fig, axes)"""
    fig, axes = plt.subplots(1, len(schedules), figsize=(14.5, 7), layout="constrained")
    for a, (computed, partial, grid, title) in zip(axes, schedules):
        tile_schedule(computed, ax=a, partial=partial, Br=B, Bc=B, title=title)
        ij = sorted(zip(*np.nonzero(grid >= 0)), key=lambda t: grid[t])  # computed tiles in visit order
        for k, (i, j) in enumerate(ij):
            a.text(j, i, str(k + 1), ha="center", va="center", fontsize=LABEL_SIZE + 2, fontweight="bold",
                   color="white" if not partial[i, j] else "black")
        for (i0, j0), (i1, j1) in zip(ij[:-1], ij[1:]):  # arrows from each tile to the next one visited
            a.annotate("", xy=(j1, i1), xytext=(j0, i0),
                       arrowprops=dict(arrowstyle="->", color=LINE_COLORS[3], lw=2, shrinkA=13, shrinkB=13,
                                       connectionstyle="arc3,rad=0.15"))
    for a in axes[:-1]:
        a.get_legend().remove()  # one legend, on the right, is enough
    for text in axes[-1].get_legend().get_texts():  # the words of the tile-state figure
        text.set_text({"computed": "full tile (no mask inside)", "computed, masked inside": "diagonal tile: masked inside",
                       "skipped": "skipped: never loaded"}[text.get_text()])
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes
