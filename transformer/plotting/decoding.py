"""Drawing helpers of lessons 06–08 (the KV cache, grouped-query attention, online softmax): the
long matplotlib blocks live here, so a lesson's code cell shows the concept and one call draws it.

Every function draws on the axes it is given (or makes its own figure), returns
`(fig, ax)` or `(fig, axes)` and never calls `plt.show()`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch, Rectangle

from .base import attention_heatmap, curves
from .early import matrix, own_axes, style_axes
from .style import LABEL_SIZE, LINE_COLORS, OFF_COLOR, ON_COLOR, PARTIAL_COLOR, TICK_SIZE, TITLE_SIZE

__all__ = ["prefill_decode", "time_per_token", "output_rescaling", "kv_sharing", "block_pool", "fragmentation",
           "gqa_worked_example"]


# ---------------------------------------------------------------- lesson 06

def prefill_decode(prefill, decode, labels, *, layer=None, head=None):
    """Prefill's n × n causal weights above the decode step's single row over n + 1 keys.

    prefill: (n, n) weights (zero above the diagonal); decode: (n + 1,) the new token's weights;
    labels: the n + 1 tokens. Cells hidden by the causal mask are grey (OFF_COLOR, as in every
    mask figure); the column of the key that does not exist yet during prefill is hatched.
    Returns (fig, (ax_prefill, ax_decode)).
    """
    prefill, decode = np.asarray(prefill, dtype=np.float64), np.asarray(decode, dtype=np.float64)
    n = prefill.shape[0]
    top = np.full((n, n + 1), np.nan)  # (n, n + 1): the last column is the key not computed yet
    top[:, :n] = np.where(np.tril(np.ones((n, n), dtype=bool)), prefill, np.nan)  # masked cells: no weight
    fig, (a0, a1) = plt.subplots(2, 1, figsize=(10.5, 10), layout="constrained",
                                 gridspec_kw=dict(height_ratios=[n, 1.4]))
    vmax = float(max(np.nanmax(top), decode.max()))
    where = "" if layer is None else f" (layer {layer}, head {head})"
    im = matrix(a0, top, labels[:n], labels, vmax=vmax, title=f"Prefill: {n} queries × {n} keys, causal{where}",
                ylabel="query  (attending)")  # NaN cells, hidden by the mask: grey
    a0.add_patch(Rectangle((n - 0.5, -0.5), 1, n, facecolor="white", edgecolor="#999999", hatch="//",
                           linewidth=0))
    a0.text(n, (n - 1) / 2, f"key {n} not\ncomputed yet", rotation=90, ha="center", va="center",
            fontsize=LABEL_SIZE, color="#333333", bbox=dict(facecolor="white", edgecolor="none", pad=2))
    matrix(a1, decode[None], [labels[-1]], labels, vmax=vmax, annotate=True,
           title=f"Decode: 1 query × {n + 1} keys ({n} cached + 1 new), no mask", xlabel="key  (attended to)",
           ylabel="query")
    for a in (a0, a1):
        a.tick_params(axis="y", labelsize=LABEL_SIZE)
    for t in a1.texts:
        t.set_fontsize(LABEL_SIZE)
    fig.colorbar(im, ax=[a0, a1], fraction=0.04, pad=0.02).set_label("weight", fontsize=LABEL_SIZE)
    fig.legend(handles=[Patch(color=OFF_COLOR, label="hidden by the causal mask")], loc="outside lower center",
               fontsize=LABEL_SIZE, frameon=False)
    return fig, (a0, a1)


def time_per_token(positions, t_without, t_with, ax=None, *, n_prompt, title=None):
    """Seconds per generation step without and with the KV cache (step 0, the prefill, as squares).

    positions: (steps,) position of the token each step produces; t_without, t_with: (steps,) seconds.
    Returns (fig, ax).
    """
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.ticker import MaxNLocator

    fig, ax = own_axes(ax, figsize=(11, 6))
    ms_without, ms_with = np.asarray(t_without) * 1e3, np.asarray(t_with) * 1e3
    red, blue = LINE_COLORS[1], LINE_COLORS[0]
    ax.plot(positions[1:], ms_without[1:], "o-", color=red, linewidth=2.5,
            label=f"no cache: all {n_prompt}+t tokens again   (total {ms_without.sum() / 1e3:.2f} s)")
    ax.plot(positions[1:], ms_with[1:], "o-", color=blue, linewidth=2.5,
            label=f"KV cache: one token per step   (total {ms_with.sum() / 1e3:.2f} s)")
    sq_without = ax.plot([positions[0]], [ms_without[0]], "s", markersize=14, markerfacecolor="none",
                         markeredgecolor=red, markeredgewidth=2.5)[0]  # hollow: the filled one may sit inside it
    sq_with = ax.plot([positions[0]], [ms_with[0]], "s", markersize=8, color=blue)[0]
    handles, labels = ax.get_legend_handles_labels()
    handles.append((sq_without, sq_with))
    labels.append(f"step 0: prefill of the {n_prompt}-token prompt, the same forward pass in both runs")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(ms_without.max(), ms_with.max()) * 1.4)  # headroom for the legend
    style_axes(ax, title, "position of the generated token", "milliseconds per step", grid=True)
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0.6)},
              fontsize=TICK_SIZE + 1, frameon=False, loc="upper left")
    return fig, ax


# ---------------------------------------------------------------- lesson 08

def _place_label(ax, xy, text, blocked, *, lead=False, pad=3.0, **kw):
    """Write `text` beside the data point xy at the nearest free spot: offsets on rings of growing
    radius (points), the first whose box (and, with lead, its line back to xy) stays inside the
    axes and overlaps no box of `blocked` (display pixels); where none is free, the spot with the
    fewest overlaps. The label's boxes join `blocked`; a label with a lead sits centred on its spot,
    one without it grows away from xy. Call after the figure is drawn: the layout and the limits
    must be final."""
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    anchor = ax.transData.transform(xy)  # (2,) pixels
    frame = ax.bbox.padded(-2)
    best = None  # (overlaps, offset, alignment, boxes)
    for r in (6, 11, 17, 24, 32, 42, 54, 68):
        for deg in (0, 30, -30, 60, -60, 90, -90, 120, -120, 150, -150, 180):
            dx, dy = r * np.cos(np.radians(deg)), r * np.sin(np.radians(deg))
            ha = "center" if lead or abs(dx) < 1 else ("left" if dx > 0 else "right")
            va = "center" if lead or abs(dy) < 1 else ("bottom" if dy > 0 else "top")
            ann = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **kw)
            ann.update_positions(renderer)  # place the text now, not at the next draw
            box = Text.get_window_extent(ann, renderer).padded(pad)  # the text alone, not its lead
            ann.remove()
            if not (frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)):
                continue
            feet = [box]
            if lead:  # points along the line from xy to the label, clear of xy's own marker
                mid = np.array([box.intervalx.mean(), box.intervaly.mean()])
                feet += [Bbox.from_bounds(*(anchor + t * (mid - anchor) - 1.5), 3, 3) for t in np.linspace(0.3, 0.7, 5)]
            hits = sum(f.overlaps(b) for f in feet for b in blocked)
            if best is None or hits < best[0]:
                best = (hits, (dx, dy), (ha, va), feet)
            if hits == 0:
                break
        if best is not None and best[0] == 0:
            break
    if best is None:
        raise ValueError(f"the label {text!r} fits nowhere inside the axes near {xy}")
    _, offset, (ha, va), feet = best
    blocked.extend(feet)
    ann = ax.annotate(text, xy, xytext=offset, textcoords="offset points", ha=ha, va=va, **kw)
    ann.set_in_layout(False)  # the layout is already final
    return ann


def _marker_boxes(ax, points, size_pt):  # (k, 2) data points, k or 1 marker diameters (points) -> k display boxes
    from matplotlib.transforms import Bbox

    half = np.broadcast_to(np.asarray(size_pt, dtype=float), (len(points),)) / 2 * ax.figure.dpi / 72
    return [Bbox.from_extents(x - r, y - r, x + r, y + r)
            for (x, y), r in zip(ax.transData.transform(points), half)]


def output_rescaling(x, V, running, exact, m_history, axes=None):
    """The running output O_j / l_j of online softmax: its path among the 2-D values (left) and each
    component against the step (right), with the steps where the max rose shaded.

    x: (n,) scores; V: (n, 2) values; running: (n, 2) O_j / l_j after each step; exact: (2,)
    softmax(x) @ V; m_history: (n,) the running max. Returns (fig, (ax_path, ax_steps)).
    """
    x, V, running, exact = (np.asarray(a, dtype=np.float64) for a in (x, V, running, exact))
    n = len(x)
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(16, 6.5), layout="constrained", width_ratios=[1, 1.15])
    ax_p, ax_c = axes
    fig = ax_p.figure
    e = np.exp(x - x.max())
    weights = e / e.sum()  # (n,) the final softmax weights, for the marker areas
    areas = 120 + 1400 * weights  # points²
    ax_p.scatter(V[:, 0], V[:, 1], s=areas, color=LINE_COLORS[2], alpha=0.45,
                 edgecolor="black", zorder=2, label="value v_j (area ∝ final weight)")
    ax_p.plot(running[:, 0], running[:, 1], "-o", color=LINE_COLORS[0], linewidth=2.5, markersize=7,
              zorder=3, label="running output O_j / l_j")
    ax_p.plot(*exact, marker="*", markersize=18, color=LINE_COLORS[1], linestyle="none",
              markeredgecolor="black", zorder=4, label="softmax(x) @ V")
    ax_p.set_aspect("equal", adjustable="datalim")
    ax_p.margins(0.12)  # room around the points for their labels
    style_axes(ax_p, "The running output O_j / l_j (numbered by step j) stays\namong the values: "
               "a weighted average of v_1…v_j", "value dim 0", "value dim 1", grid=True)
    ax_p.legend(fontsize=TICK_SIZE, frameon=False, loc="upper left", markerscale=0.6)
    steps = np.arange(1, n + 1)
    for c in range(2):
        ax_c.plot(steps, running[:, c], "-o", color=LINE_COLORS[c], linewidth=2.5, label=f"O_j / l_j, dim {c}")
        ax_c.axhline(exact[c], color=LINE_COLORS[c], linestyle="--", linewidth=1.5, label=f"softmax(x) @ V, dim {c}")
    for j in np.nonzero(np.diff(np.asarray(m_history)) > 0)[0] + 1:  # step j + 1 raised m; step 1 rescales nothing
        ax_c.axvline(j + 1, color="grey", alpha=0.35, linewidth=6, zorder=0)
    ax_c.set_xticks(steps)
    style_axes(ax_c, "Each component reaches the exact output at the last key", "step j (keys seen)",
               "running output", grid=True)
    handles, _ = ax_c.get_legend_handles_labels()
    handles.append(Patch(color="grey", alpha=0.35, label="the max rose: O and l rescaled"))
    ax_c.legend(handles=handles, fontsize=TICK_SIZE, frameon=False, loc="upper center",
                bbox_to_anchor=(0.5, -0.13), ncols=3)

    fig.canvas.draw()  # the layout and the equal-aspect limits are final: now labels can be placed
    renderer = fig.canvas.get_renderer()
    path = np.concatenate([a + np.linspace(0, 1, 25)[:, None] * (b - a)  # (25·(n − 1), 2) along the path
                           for a, b in zip(running[:-1], running[1:])])
    blocked = (_marker_boxes(ax_p, V, np.sqrt(areas)) + _marker_boxes(ax_p, running, 7)
               + _marker_boxes(ax_p, path, 3) + _marker_boxes(ax_p, exact[None], 18)
               + [ax_p.get_legend().get_window_extent(renderer)])
    for j in range(n):  # each value named with its score
        _place_label(ax_p, V[j], f"v{j + 1} (x={x[j]:g})", blocked, fontsize=TICK_SIZE)
    for j in range(n):  # each point of the path numbered: step j has seen keys 1…j
        _place_label(ax_p, running[j], f"{j + 1}", blocked, lead=True, pad=5, fontsize=TICK_SIZE, color="white",
                     fontweight="bold", zorder=5,
                     bbox=dict(boxstyle="circle,pad=0.2", facecolor=LINE_COLORS[0], edgecolor="none"),
                     arrowprops=dict(arrowstyle="-", color=LINE_COLORS[0], linewidth=1))
    return fig, (ax_p, ax_c)


# ---------------------------------------------------------------- lesson 07

def kv_sharing(reads, axes=None, *, suptitle=None):
    """Which key/value head each query head reads, one panel per scheme (MHA, GQA, MQA).

    reads: {name: (h,) index of the KV head read by each query head}. Returns (fig, axes).
    """
    if axes is None:
        fig, axes = plt.subplots(1, len(reads), figsize=(17, 5), layout="constrained")
    fig = axes[0].figure
    kv_cols = plt.get_cmap("tab10")
    for a, (name, r) in zip(axes, reads.items()):
        r = np.asarray(r)
        h, h_kv = len(r), int(r.max()) + 1
        xq = np.arange(h) * 1.5  # query boxes, evenly spaced
        xk = (np.arange(h_kv) + 0.5) * (h * 1.5 / h_kv) - 0.75  # KV boxes, centred under their group
        for i in range(h):
            j = r[i]
            a.plot([xq[i], xk[j]], [1.55, 0.45], color=kv_cols(j), linewidth=3, zorder=1)
            a.add_patch(Rectangle((xq[i] - 0.5, 1.55), 1.0, 0.7, color=kv_cols(j), alpha=0.35, zorder=2))
            a.text(xq[i], 1.9, f"Q{i}", ha="center", va="center", fontsize=LABEL_SIZE + 2)
        for j in range(h_kv):
            a.add_patch(Rectangle((xk[j] - 0.5, -0.25), 1.0, 0.7, color=kv_cols(j), zorder=2))
            a.text(xk[j], 0.1, f"KV{j}", ha="center", va="center", fontsize=LABEL_SIZE + 2, color="white",
                   fontweight="bold")
        a.set_xlim(-1, h * 1.5 - 0.5), a.set_ylim(-0.5, 2.5), a.axis("off")
        a.set_title(f"{name}: {h} query heads, {h_kv} KV head{'s' if h_kv > 1 else ''}\n"
                    f"cache holds {h_kv}/{h} of MHA's K and V", fontsize=TITLE_SIZE)
    if suptitle:
        fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes


# ---------------------------------------------------------------- lesson 14: a paged KV cache
def block_pool(snaps, names, *, n_blocks, B):
    """One row per snapshot (title, owner, filled, tables) of a pool of `n_blocks` blocks × `B`
    slots: a slot is filled in its request's colour, reserved-but-empty hatched, a free block grey;
    each row lists the requests' block tables. owner[blk]: request id or -1, names: id -> letter.
    -> (fig, axes)"""
    seq_colour = {nm: LINE_COLORS[i] for i, nm in enumerate("ABCD")}
    fig, axes = plt.subplots(len(snaps), 1, figsize=(15, 2.55 * len(snaps) + 0.8), layout="constrained")
    for a, (title, owner, filled, tables) in zip(axes, snaps):
        for blk in range(n_blocks):
            x0 = blk * (B + 1)  # one column per slot, a gap between blocks
            nm = names.get(owner[blk]) if owner[blk] >= 0 else None
            for slot in range(B):
                used = nm is not None and slot < filled[blk]
                colour = seq_colour[nm] if used else ("white" if nm else OFF_COLOR)
                edge = "white" if used else seq_colour.get(nm, "grey")  # white lines keep filled slots apart
                a.add_patch(Rectangle((x0 + slot, 0), 0.92, 1, facecolor=colour, edgecolor=edge,
                                      linewidth=1.5, hatch="//" if (nm and not used) else None))
            a.text(x0 + B / 2, -0.3, f"block {blk}", ha="center", va="top", fontsize=TICK_SIZE)
            if nm is not None:
                a.text(x0 + B / 2, 1.15, nm, ha="center", va="bottom", fontsize=LABEL_SIZE, fontweight="bold",
                       color=seq_colour[nm])
        table_text = "   ".join(f"{nm}: {t}  ({n} tok)" for nm, (t, n) in tables.items())
        a.text(0, 2.05, "block tables   " + table_text, fontsize=LABEL_SIZE, va="bottom", family="monospace")
        a.set_xlim(-0.5, n_blocks * (B + 1)), a.set_ylim(-1.0, 2.9), a.axis("off")
        a.set_title(title, fontsize=TITLE_SIZE, loc="left")
    fig.legend(handles=[Patch(facecolor="grey", label="slot holding a token's K and V"),
                        Patch(facecolor="white", edgecolor="grey", hatch="//", label="reserved, not yet filled"),
                        Patch(facecolor=OFF_COLOR, label="free block")],
               loc="outside lower center", ncols=3, fontsize=LABEL_SIZE, frameon=False)
    fig.suptitle(f"A pool of {n_blocks} blocks × {B} positions shared by requests; each request's table lists its blocks",
                 fontsize=TITLE_SIZE + 1)
    return fig, axes


def fragmentation(lengths, report, waste, *, n_max, block, per_tok, model_name):
    """Left: GiB reserved per request (longest first), contiguous (n_max each) vs paged (whole
    blocks) vs used. Middle: the batch's totals from `report`. Right: last-block waste against the
    block size, waste = (block_line, waste_line, block_meas, waste_meas) in MiB, with the
    contiguous waste dashed. -> (fig, axes)"""
    block_line, waste_line, block_meas, waste_meas = waste
    b_req = len(lengths)
    fig, (ax_r, ax_t, ax_b) = plt.subplots(1, 3, figsize=(18, 6.4), layout="constrained", width_ratios=[2.2, 1, 1.3])
    order = np.argsort(lengths)[::-1]
    xr = np.arange(b_req)
    gib = per_tok / 2 ** 30
    ax_r.bar(xr, np.full(b_req, n_max * gib), color=OFF_COLOR, width=0.85, label=f"contiguous: n_max = {n_max} each")
    ax_r.bar(xr, -(-lengths[order] // block) * block * gib, color=PARTIAL_COLOR, width=0.85,
             label=f"paged: whole blocks of {block}")
    ax_r.bar(xr, lengths[order] * gib, color=ON_COLOR, width=0.55, label="used: the request's tokens")
    ax_r.set_xticks(xr, [str(n) for n in lengths[order]], rotation=90, fontsize=TICK_SIZE)
    style_axes(ax_r, f"Per request ({model_name}, 16-bit cache), longest first", "request length (tokens)",
               "GiB reserved")
    ax_r.set_ylim(0, n_max * gib * 1.38)  # headroom above the grey bars for the legend
    ax_r.legend(fontsize=TICK_SIZE + 1, frameon=False, loc="upper right")
    totals = {"used": report["used"], "paged\nreserved": report["paged_reserved"],
              "contiguous\nreserved": report["contiguous_reserved"]}
    ax_t.bar(range(3), np.array(list(totals.values())) / 2 ** 30,
             color=[ON_COLOR, PARTIAL_COLOR, OFF_COLOR], edgecolor="black", linewidth=0.8)
    for i, val in enumerate(totals.values()):
        share = "" if i == 0 else f"\n{report['used'] / val:.0%} used"
        ax_t.text(i, val / 2 ** 30, f"{val / 2 ** 30:.2f} GiB{share}", ha="center", va="bottom", fontsize=TICK_SIZE)
    ax_t.set_xticks(range(3), list(totals), fontsize=TICK_SIZE)
    ax_t.set_ylim(0, report["contiguous_reserved"] / 2 ** 30 * 1.2)
    style_axes(ax_t, f"The batch of {b_req}", None, "GiB")
    contig_waste = report["contiguous_waste"] / 2 ** 20
    curves(block_line, {"paged: last-block waste": waste_line}, {"paged: last-block waste": np.array(waste_meas)},
           x_measured=block_meas, ax=ax_b, xlabel="block size (positions)", ylabel="reserved but unused (MiB)",
           title="Waste vs block size", measured_label="PagedKVCache", logy=True)
    ax_b.axhline(contig_waste, color=LINE_COLORS[1], linestyle="--", linewidth=2)
    ax_b.text(block_line[0], contig_waste * 0.8, f"contiguous: {contig_waste:,.0f} MiB", va="top",
              color=LINE_COLORS[1], fontsize=TICK_SIZE)
    return fig, (ax_r, ax_t, ax_b)


# ---------------------------------------------------------------- lesson 07: GQA, matrix by matrix
def gqa_worked_example(q, k, v, weights, mask, group, *, suptitle):
    """Row 0: the query heads q [1, h, n, d_h]; row 1: the stored K and V heads [1, h_kv, n, d_h],
    each pair under its group; row 2: each query head's weights [1, h, n, n], pairs hidden by
    `mask` [n, n] grey. Frames in the group's colour; group[i] is query head i's KV head;
    -> (fig, axd)"""
    h, h_kv = q.shape[1], k.shape[1]
    kv_cols = plt.get_cmap("tab10")  # one colour per KV head, as in kv_sharing
    fig, axd = plt.subplot_mosaic([[f"Q{i}" for i in range(h)],
                                   [f"{name}{j}" for j in range(h_kv) for name in "KV"],
                                   [f"P{i}" for i in range(h)]], figsize=(18, 12.5), layout="constrained")
    lim = float(max(np.abs(q).max(), np.abs(k).max(), np.abs(v).max()))  # one colour scale for Q, K and V
    for i in range(h):
        j = group[i]
        attention_heatmap(q[0, i], ax=axd[f"Q{i}"], signed=True, vmin=-lim, vmax=lim, fmt=".1f", colorbar=False,
                          title=f"Q head {i}  (group {j})", xlabel="d_h", ylabel="token" if i == 0 else None)
        attention_heatmap(weights[0, i], ax=axd[f"P{i}"], vmax=1.0, colorbar=False,
                          title=f"weights, Q head {i} (reads K{j}, V{j})", xlabel="key",
                          ylabel="query" if i == 0 else None)
        for t in list(axd[f"P{i}"].texts):  # pairs hidden by the causal mask: grey, no number (as in lesson 05)
            col, row = (round(c) for c in t.get_position())
            if not mask[row, col]:
                t.remove()
                axd[f"P{i}"].add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, color=OFF_COLOR))
    for j in range(h_kv):
        readers = ", ".join(f"Q{i}" for i in range(h) if group[i] == j)
        for name, mat in (("K", k), ("V", v)):
            attention_heatmap(mat[0, j], ax=axd[f"{name}{j}"], signed=True, vmin=-lim, vmax=lim, fmt=".1f",
                              colorbar=False, title=f"{name} head {j}  (read by {readers})", xlabel="d_h",
                              ylabel="token" if (name, j) == ("K", 0) else None)
    for key, a in axd.items():
        a.set_xticks(range(q.shape[2])), a.set_yticks(range(q.shape[2]))
        if key[0] in "QKV":  # frame in the group's colour, as in kv_sharing
            j = group[int(key[1])] if key[0] == "Q" else int(key[1])
            for sp in a.spines.values():
                sp.set_edgecolor(kv_cols(j)), sp.set_linewidth(5)
    cb = fig.colorbar(axd["K0"].images[0], ax=[a for key, a in axd.items() if key[0] in "QKV"], fraction=0.03,
                      pad=0.02, aspect=45)  # one bar the height of the Q and K/V rows
    cb.set_label("entry of Q, K or V", fontsize=LABEL_SIZE), cb.ax.tick_params(labelsize=TICK_SIZE)
    cb = fig.colorbar(axd["P0"].images[0], ax=[axd[f"P{i}"] for i in range(h)], fraction=0.03, pad=0.02, aspect=20)
    cb.set_label("attention weight", fontsize=LABEL_SIZE), cb.ax.tick_params(labelsize=TICK_SIZE)
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axd
