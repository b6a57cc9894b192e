"""Drawing helpers of lessons 11–15 (real models, counting, cross-attention): the long figure
code, so a lesson's cells show the concept.

Each function takes the numbers the lesson computed, draws, returns (fig, ax) or (fig, axes)
and never calls plt.show(); the lesson saves with plotting.save. The shared drawing functions
(curves, attention_heatmap, head_grid) come from base.py.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from .base import attention_heatmap, curves, head_grid
from .early import style_axes
from .style import ANNOT_SIZE, LABEL_SIZE, LINE_COLORS, ON_COLOR, TICK_SIZE, TITLE_SIZE

__all__ = ["parameter_shares", "flops_by_phase", "roofline", "kv_cache_growth", "three_attentions",
           "encoder_decoder_flow", "temperature_effect", "heads_with_row", "row_bars"]


# ---------------------------------------------------------------- lesson 13: counting a model
def parameter_shares(parts, part_names, *, title):
    """One stacked bar per model: each part's share of all parameters, with its name, share and
    count where they fit. `parts`: {model: {part: count, "total": count}}. -> (fig, ax)"""
    fig, ax = plt.subplots(figsize=(15, 5.8), layout="constrained")
    part_colours = [LINE_COLORS[i] for i in (4, 0, 2, 5, 3)]
    names = list(parts)
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for colour, (key, label) in zip(part_colours, part_names.items()):
        share = np.array([parts[nm][key] / parts[nm]["total"] for nm in names]) * 100
        ax.barh(y, share, left=left, color=colour, label=label, edgecolor="white", height=0.62)
        for yi, lo, sh, nm in zip(y, left, share, names):
            if sh >= 15:  # name, share and count where they fit; only the share in thinner segments
                ax.text(lo + sh / 2, yi, f"{label}\n{sh:.0f} %  ({parts[nm][key] / 1e6:,.0f} M)", ha="center",
                        va="center", fontsize=TICK_SIZE, color="white", fontweight="bold")
            elif sh >= 0.5:
                ax.text(lo + sh / 2, yi + 0.34, f"{sh:.1f} %", ha="center", va="bottom", fontsize=TICK_SIZE,
                        color=colour, fontweight="bold")
        left += share
    ax.set_yticks(y, [f"{nm}\n{parts[nm]['total']:,} parameters" for nm in names], fontsize=LABEL_SIZE)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, len(names) - 0.2)
    ax.text(100.5, y[0], "LM head tied\nto embeddings", va="center", fontsize=TICK_SIZE, color=part_colours[4])
    style_axes(ax, title, "share of all parameters (%)", None)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=5, fontsize=LABEL_SIZE, frameon=False)
    return fig, ax


def flops_by_phase(n_line, ll, *, model="Llama-3-8B"):
    """Prefill (TFLOP) and one decode step (GFLOP) against the context n: total, matmuls with the
    weights, attention; the crossover n* dotted. `ll`: {"prefill": rows, "decode": rows, "n_star"},
    rows of {"total", "matmul", "attention"}. -> (fig, axes)"""
    fig, axes = plt.subplots(1, 2, figsize=(17, 6.5), layout="constrained")
    for a, phase, unit, scale in ((axes[0], "prefill", "TFLOP", 1e12), (axes[1], "decode", "GFLOP", 1e9)):
        rows = ll[phase]
        lines = {
            "total": np.array([r["total"] for r in rows]) / scale,
            "matmuls with the weights (∝ n)" if phase == "prefill" else "matmuls with the weights (constant)":
                np.array([r["matmul"] for r in rows]) / scale,
            "attention: QKᵀ and PV, dense n × n (∝ n²)" if phase == "prefill" else "attention: q·Kᵀ and p·V (∝ n)":
                np.array([r["attention"] for r in rows]) / scale,
        }
        curves(n_line, lines, ax=a, xlabel="context length n (tokens)", ylabel=f"{unit}",
               title=("Prefill: the whole prompt of n tokens" if phase == "prefill"
                      else "Decode: one new token after n cached ones")
               + (f"\n({model}, b = 1, logits at every position)" if phase == "prefill" else f"\n({model}, b = 1)"),
               styles={"total": dict(color="black", linewidth=3.5, alpha=0.35)})
        a.axvline(ll["n_star"], color="grey", linestyle=":", linewidth=2)
        a.text(ll["n_star"] * 0.9, 0.03, f"n* = {ll['n_star']:,.0f}\nattention = weights"
               + ("\n(dense scores; a causal\nkernel: about 2 n*)" if phase == "prefill" else ""),
               transform=a.get_xaxis_transform(), ha="right", va="bottom", fontsize=TICK_SIZE, color="dimgrey")
    return fig, axes


def roofline(n_ai, intensity, roof_points, models, *, peak_flops, bandwidth):
    """Left: FLOPs per byte against n, prefill solid and decode dashed, one colour per model, the
    ridge peak/bandwidth dotted. Right: the roofline min(peak, I · bandwidth) with `roof_points`
    {label: I} on it. -> (fig, axes)"""
    ridge = peak_flops / bandwidth
    fig, (ax_i, ax_r) = plt.subplots(1, 2, figsize=(17, 6.6), layout="constrained")
    styles = {}
    for k, name in enumerate(models):
        styles[f"{name} prefill"] = dict(color=LINE_COLORS[k], linewidth=2.5)
        styles[f"{name} decode"] = dict(color=LINE_COLORS[k], linewidth=2.5, linestyle="--")
    curves(n_ai, intensity, ax=ax_i, styles=styles, xlabel="context length n (tokens), b = 1",
           ylabel="FLOPs per byte moved", title="Arithmetic intensity: prefill (solid) vs decode (dashed)")
    ax_i.axhline(ridge, color="black", linewidth=2, linestyle=":")
    ax_i.text(n_ai[-1], ridge / 1.3, f"ridge of an H100: {ridge:.0f} FLOP/B\n(above: compute-bound)", ha="right",
              va="top", fontsize=TICK_SIZE + 1)
    ax_i.text(n_ai[0], 1.6, "decode: ≈ 1 FLOP per byte → memory-bound", fontsize=TICK_SIZE + 1,
              color="dimgrey")
    ax_i.set_ylim(0.4, intensity[f"{list(models)[0]} prefill"].max() * 3)  # the first model's prefill: the top line
    ax_i.legend(fontsize=TICK_SIZE, frameon=False, loc="upper left")
    I_line = np.logspace(-1, 4.5, 200)
    ax_r.plot(I_line, np.minimum(peak_flops, I_line * bandwidth) / 1e12, color="black", linewidth=3)
    ax_r.axvline(ridge, color="black", linewidth=1.5, linestyle=":")
    for k, (label, I) in enumerate(roof_points.items()):
        ax_r.plot(I, min(peak_flops, I * bandwidth) / 1e12, "o", markersize=12, markeredgecolor="black",
                  color=LINE_COLORS[(k + 1) % len(LINE_COLORS)], label=f"{label}: {I:,.0f} FLOP/B")
    ax_r.set_xscale("log"), ax_r.set_yscale("log")
    ax_r.text(ridge * 1.15, 1.5, f"ridge {ridge:.0f} FLOP/B", fontsize=TICK_SIZE + 1, rotation=90, va="bottom")
    ax_r.text(0.12, 150, f"memory-bound:\nTFLOP/s = {bandwidth / 1e12:.2f} TB/s × FLOP/B", fontsize=TICK_SIZE + 1,
              va="bottom")
    ax_r.text(ridge * 1.6, peak_flops / 1e12 / 2.2, f"compute-bound:\n{peak_flops / 1e12:.0f} TFLOP/s",
              fontsize=TICK_SIZE + 1, va="top")
    style_axes(ax_r, "Roofline of an H100 (published peaks), Llama-3-8B at n = 1024", "FLOPs per byte moved",
               "attainable TFLOP/s", grid=True)
    ax_r.legend(fontsize=TICK_SIZE, frameon=False, loc="lower right")
    return fig, (ax_i, ax_r)


def kv_cache_growth(n_kv, kv_line, kv_meas, n_kv_meas, windows, weights_gib):
    """The KV cache of one sequence (GiB) against the context: formula lines, measured dots, each
    model's context window as a diamond {name: (n_ctx, GiB)} and its weights dashed. -> (fig, ax)"""
    fig, ax = plt.subplots(figsize=(11.5, 6.8), layout="constrained")
    curves(n_kv, kv_line, kv_meas, x_measured=n_kv_meas, ax=ax, xlabel="context length n (tokens), b = 1",
           ylabel="GiB (16-bit)", title="KV cache of one sequence over the context; dashed: the model's own weights",
           measured_label="KVCache.nbytes")
    for k, (name, (n_ctx, gib)) in enumerate(windows.items()):
        ax.plot([n_ctx], [gib], marker="D", markersize=11, color=LINE_COLORS[k],
                markeredgecolor="black", linestyle="none", label="context window" if k == 0 else None, zorder=5)
        ax.axhline(weights_gib[name], color=LINE_COLORS[k], linestyle="--", linewidth=1.5)
        ax.text(n_kv[0], weights_gib[name] * 1.12, f"{name} weights {weights_gib[name]:.2f} GiB",
                color=LINE_COLORS[k], fontsize=TICK_SIZE)
    leg = ax.get_legend()  # keep the curves' legend (lines with their dots), move it out of the way
    window_handle = Line2D([], [], marker="D", markersize=10, color="white", markeredgecolor="black", linestyle="none")
    ax.legend(list(leg.legend_handles) + [window_handle], [t.get_text() for t in leg.get_texts()] + ["context window"],
              fontsize=TICK_SIZE, frameon=False, loc="lower right")
    return fig, ax


# ---------------------------------------------------------------- lesson 15: encoder–decoder
def three_attentions(enc_self, dec_self, cross, src, tgt, *, suptitle):
    """The three attentions of one head side by side, one colour scale: encoder self-attention
    [n_enc, n_enc], decoder masked self-attention [n_dec, n_dec] (future cells grey) and
    cross-attention [n_dec, n_enc]. -> (fig, axes)"""
    n_enc, n_dec = len(src), len(tgt)
    fig, axes = plt.subplots(1, 3, figsize=(21, 6.8), layout="constrained", width_ratios=[n_enc, n_dec, n_enc])
    attention_heatmap(enc_self, src, src, ax=axes[0], vmax=1.0, colorbar=False,
                      title=f"encoder self-attention\nbidirectional, {n_enc} × {n_enc}")
    attention_heatmap(dec_self, tgt, tgt, ax=axes[1], vmax=1.0, colorbar=False, mask=np.tri(n_dec, dtype=bool),
                      title=f"decoder masked self-attention\ncausal, {n_dec} × {n_dec}", ylabel=None)
    attention_heatmap(cross, tgt, src, ax=axes[2], vmax=1.0, colorbar=False,
                      title=f"cross-attention: Q from decoder, K/V from encoder\n{n_dec} × {n_enc}  (n_dec × n_enc)",
                      xlabel="encoder position (key)", ylabel="decoder position (query)")
    for a in axes:
        a.tick_params(labelsize=LABEL_SIZE)
        a.tick_params(axis="x", labelrotation=0)
        for t in a.texts:
            t.set_fontsize(TICK_SIZE)
    fig.colorbar(axes[0].images[0], ax=axes, fraction=0.02, pad=0.01).set_label("weight", fontsize=LABEL_SIZE)
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes


def encoder_decoder_flow(enc_boxes, dec_boxes, *, N, title):
    """The encoder (left) and decoder (right) as columns of (label, shape) boxes, top to bottom;
    boxes 2–3 of the encoder and 2–4 of the decoder are the layer repeated N times, box 3 of the
    decoder is cross-attention, fed by an arrow from the encoder's last box Z. -> (fig, ax)"""
    fig, ax = plt.subplots(figsize=(17, 10))
    box_w, box_h, gap = 7.4, 1.05, 0.55
    col_x = {"enc": 0.0, "dec": 10.4}
    pos = {}
    for side, boxes in (("enc", enc_boxes), ("dec", dec_boxes)):
        for k, (label, shape) in enumerate(boxes):
            y0 = -(k * (box_h + gap))
            in_stack = 2 <= k <= (3 if side == "enc" else 4)
            colour = {"enc": LINE_COLORS[0], "dec": LINE_COLORS[1]}[side] if in_stack else "#999999"
            if side == "dec" and k == 3:
                colour = LINE_COLORS[2]  # cross-attention
            ax.add_patch(plt.Rectangle((col_x[side], y0), box_w, box_h, color=colour, alpha=0.18))
            ax.text(col_x[side] + 0.15, y0 + box_h / 2, label, va="center", fontsize=LABEL_SIZE)
            ax.text(col_x[side] + box_w - 0.15, y0 + box_h / 2, shape, va="center", ha="right",
                    fontsize=LABEL_SIZE, fontfamily="monospace", fontweight="bold")
            pos[side, k] = y0
            if k:
                ax.annotate("", xy=(col_x[side] + box_w / 2, y0 + box_h),
                            xytext=(col_x[side] + box_w / 2, y0 + box_h + gap),
                            arrowprops=dict(arrowstyle="->", linewidth=1.8))
    for side, (k0, k1) in (("enc", (2, 3)), ("dec", (2, 4))):  # brace the N repeated layers
        top, bot = pos[side, k0] + box_h + 0.12, pos[side, k1] - 0.12
        x = col_x[side] - 0.25 if side == "enc" else col_x[side] + box_w + 0.25
        ax.plot([x, x], [bot, top], color="black", linewidth=2)
        ax.text(x + (-0.2 if side == "enc" else 0.2), (top + bot) / 2, f"× N = {N}\n(paper: 6)",
                ha="right" if side == "enc" else "left", va="center", fontsize=LABEL_SIZE)
    z_y = pos["enc", len(enc_boxes) - 1] + box_h / 2
    cross_y = pos["dec", 3] + box_h / 2
    ax.annotate("", xy=(col_x["dec"], cross_y), xytext=(col_x["enc"] + box_w, z_y),
                arrowprops=dict(arrowstyle="->", linewidth=2.5, color=LINE_COLORS[2], connectionstyle="arc3,rad=0.25"))
    ax.text(col_x["enc"] + box_w + 0.2, z_y + 1.15, "K, V from Z", ha="left",
            fontsize=LABEL_SIZE + 1, color=LINE_COLORS[2], fontweight="bold")
    ax.text(col_x["enc"] + box_w / 2, box_h + 0.45, "ENCODER", ha="center", fontsize=TITLE_SIZE, fontweight="bold")
    ax.text(col_x["dec"] + box_w / 2, box_h + 0.45, "DECODER", ha="center", fontsize=TITLE_SIZE, fontweight="bold")
    ax.set_xlim(-2.2, col_x["dec"] + box_w + 2.2)
    ax.set_ylim(pos["dec", len(dec_boxes) - 1] - 0.4, box_h + 1.1)
    ax.axis("off")
    ax.set_title(title, fontsize=TITLE_SIZE + 1)
    return fig, ax


# ---------------------------------------------------------------- lesson 11: temperature
def temperature_effect(probs_T, shown, labels, t_grid, p_top, entropy, *, top_label="p(␣Paris)"):
    """Left: softmax(z / T) of the tokens `shown` (ids, drawn as `labels`) for each T of
    `probs_T` {T: (v,) probabilities}. Right: the top token's probability and the entropy against
    T; drawn rounded on fixed limits, as their last digits vary with the machine's threads.
    -> (fig, axes)"""
    temps = list(probs_T)
    fig, axes = plt.subplots(1, 2, figsize=(18, 6.5), layout="constrained", width_ratios=[1.3, 1])
    width = 0.8 / len(temps)
    xs = np.arange(len(shown))
    for k, t in enumerate(temps):
        axes[0].bar(xs + (k - (len(temps) - 1) / 2) * width, probs_T[t][shown], width,
                    color=LINE_COLORS[[0, 2, 3, 1][k]], label=f"T = {t:g}")
    axes[0].set_xticks(xs, labels, fontfamily="monospace")
    axes[0].tick_params(axis="x", labelsize=LABEL_SIZE)
    axes[0].legend(fontsize=LABEL_SIZE, frameon=False)
    style_axes(axes[0], f"softmax(z / T) for the {len(shown)} most likely tokens", "next token", "probability",
               grid=True)
    axes[0].tick_params(axis="x", labelsize=LABEL_SIZE)
    axes[1].plot(t_grid, p_top.round(4), color=LINE_COLORS[1], linewidth=2.5, label=top_label)
    axes[1].set_ylim(0, 1.02)
    twin = axes[1].twinx()
    twin.plot(t_grid, entropy.round(3), color=LINE_COLORS[0], linewidth=2.5, linestyle="--", label="entropy H (nats)")
    twin.set_ylim(0, np.ceil(entropy.max()))
    twin.tick_params(labelsize=TICK_SIZE)
    twin.set_ylabel("entropy H (nats)", fontsize=LABEL_SIZE)
    axes[1].axvline(1.0, color="grey", linestyle=":", linewidth=1.5)
    style_axes(axes[1], "Sharper below T = 1, flatter above", "temperature T", top_label, grid=True)
    lines = axes[1].get_lines()[:1] + twin.get_lines()
    axes[1].legend(lines, [ln.get_label() for ln in lines], fontsize=LABEL_SIZE, frameon=False, loc="center right")
    return fig, axes


# ---------------------------------------------------------------- lesson 12: the heads of "it"
def heads_with_row(W, toks, *, row, titles, suptitle):
    """All heads of one layer, W [h, n, n], as a grid of maps with the query row `row` framed in
    red. -> (fig, axes)"""
    fig, axes = head_grid(W, toks, ncols=4, titles=titles, suptitle=suptitle)
    for a in axes:
        a.tick_params(labelsize=TICK_SIZE + 1)
        a.add_patch(plt.Rectangle((-0.5, row - 0.5), len(toks), 1, fill=False, edgecolor=LINE_COLORS[1],
                                  linewidth=2.5))  # frame the row
    fig.supxlabel("key (the token read from)", fontsize=LABEL_SIZE + 2)
    fig.supylabel("query (the token reading)", fontsize=LABEL_SIZE + 2)
    return fig, axes


def row_bars(rows, toks, marked, *, ylabel, suptitle):
    """One bar chart per (row [n], title): the weight a query gives each token, the tokens in
    `marked` in red, values written on the bars; a shared y axis. -> (fig, axes)"""
    fig, axes = plt.subplots(1, len(rows), figsize=(17, 5.5), sharey=True, layout="constrained")
    x = np.arange(len(toks))
    for a, (row, name) in zip(axes, rows):
        colours = [LINE_COLORS[1] if j in marked else ON_COLOR for j in x]
        a.bar(x, row, color=colours)
        for j in x:
            a.text(j, row[j] + 0.01, f"{row[j]:.2f}", ha="center", fontsize=ANNOT_SIZE + 1)
        a.set_xticks(x, toks, rotation=45, ha="right")
        style_axes(a, name, None, ylabel)
        a.tick_params(axis="x", labelsize=LABEL_SIZE)
    axes[0].set_ylim(0, 1.15 * max(row.max() for row, _ in rows))
    fig.suptitle(suptitle, fontsize=TITLE_SIZE + 1)
    return fig, axes
