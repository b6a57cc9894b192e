"""The figure functions draw exactly the data they are given.

Each test builds its input by hand (or from a formula written here), draws it,
and reads the drawn artists back: image arrays, tick labels, line data, colours.
"""
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from transformer import plotting as P  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def png_chunks(data: bytes):
    """(type, payload) of every chunk of a PNG file, read by hand from the spec's layout."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, out = 8, []
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        ctype = data[pos + 4:pos + 8]
        payload = data[pos + 8:pos + 8 + length]
        crc = int.from_bytes(data[pos + 8 + length:pos + 12 + length], "big")
        assert zlib.crc32(ctype + payload) == crc
        out.append((ctype, payload))
        pos += 12 + length
    return out


def tick_texts(ticklabels):
    return [t.get_text() for t in ticklabels]


def test_heatmap_draws_the_weights_and_the_tokens():
    w = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]])
    toks = ["The", "cat", "sat"]
    fig, ax = P.attention_heatmap(w, toks, toks, title="causal")
    np.testing.assert_array_equal(ax.images[0].get_array(), w)
    assert tick_texts(ax.get_xticklabels()) == toks
    assert tick_texts(ax.get_yticklabels()) == toks
    assert ax.get_title() == "causal"
    # colour scale: 0 is the sequential map's lightest end (white-ish), the top weight its darkest
    im = ax.images[0]
    assert im.norm.vmin == 0.0 and im.norm.vmax == 1.0
    white, top = im.to_rgba(np.array([0.0, 1.0]))
    assert sum(white[:3]) > 2.9 and sum(top[:3]) < 1.0
    # 3 × 3 is small: each cell carries its value
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{v:.2f}" for v in w.ravel())


def test_heatmap_signed_scores_are_centred_on_zero():
    s = np.array([[-2.0, 1.0], [0.5, 0.0]])
    fig, ax = P.attention_heatmap(s, signed=True, annotate=False)
    im = ax.images[0]
    assert (im.norm.vmin, im.norm.vmax) == (-2.0, 2.0)
    zero = im.to_rgba(0.0)
    assert all(c > 0.9 for c in zero[:3])  # white in the middle of the diverging map
    assert len(ax.texts) == 0


def test_heatmap_draws_on_a_given_axes_and_checks_labels():
    fig, ax = plt.subplots()
    f2, a2 = P.attention_heatmap(np.eye(2), ax=ax, colorbar=False)
    assert a2 is ax and f2 is fig
    with pytest.raises(ValueError, match="key labels"):
        P.attention_heatmap(np.eye(2), ["a", "b"], ["a"])


def test_head_grid_one_panel_per_head_on_a_shared_scale():
    rng = np.random.default_rng(0)
    w = rng.random((3, 4, 4))
    w /= w.sum(-1, keepdims=True)
    toks = ["a", "b", "c", "d"]
    fig, axes = P.head_grid(w, toks, ncols=2)
    assert len(axes) == 3
    for i, a in enumerate(axes):
        np.testing.assert_array_equal(a.images[0].get_array(), w[i])
        assert a.images[0].norm.vmin == 0.0 and a.images[0].norm.vmax == w.max()
        assert a.get_title() == f"head {i}"
    assert tick_texts(axes[0].get_yticklabels()) == toks  # left column carries query labels
    assert len(axes[1].get_yticks()) == 0  # right column does not repeat them
    assert tick_texts(axes[2].get_xticklabels()) == toks  # bottom row carries key labels
    # the fourth grid cell is switched off
    assert sum(a.axison for a in fig.axes if a not in axes and a.get_label() != "<colorbar>") == 0


def test_mask_gallery_titles_count_the_pairs_and_colours_are_two():
    n = 5
    causal = np.tril(np.ones((n, n), dtype=bool))  # by hand: 1 + 2 + … + 5 = 15 pairs
    band = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1  # 5 + 2·4 = 13 pairs
    fig, axes = P.mask_gallery({"causal": causal, "band": band})
    assert axes[0].get_title() == "causal\n15 pairs (60%)"
    assert axes[1].get_title() == "band\n13 pairs (52%)"
    for a, m in zip(axes, (causal, band)):
        im = a.images[0]
        np.testing.assert_array_equal(im.get_array(), m.astype(np.int8))
        rgba = im.to_rgba(im.get_array())
        on, off = np.array(to_rgba(P.ON_COLOR)), np.array(to_rgba(P.OFF_COLOR))
        np.testing.assert_allclose(rgba[m] / 255.0 if rgba.dtype == np.uint8 else rgba[m], np.tile(on, (m.sum(), 1)), atol=1 / 255)
        np.testing.assert_allclose(rgba[~m] / 255.0 if rgba.dtype == np.uint8 else rgba[~m], np.tile(off, ((~m).sum(), 1)), atol=1 / 255)
    with pytest.raises(ValueError, match="boolean"):
        P.mask_gallery({"floats": np.ones((2, 2))})


def test_mask_gallery_accepts_a_broadcast_padding_mask_and_small_densities():
    lengths = np.array([3])
    pad = (np.arange(4)[None, :] < lengths[:, None])[:, None, None, :]  # (b, 1, 1, n) as padding masks are
    sparse = np.zeros((20, 20), dtype=bool)
    sparse[0, 0] = True  # 1 pair of 400: 0.25 %, shown with a decimal rather than as "0%"
    fig, axes = P.mask_gallery({"pad": np.broadcast_to(pad[0, 0], (4, 4)), "one": sparse},
                               labels={"pad": ["a", "b", "c", "[PAD]"]})
    assert axes[0].get_title() == "pad\n12 pairs (75%)"
    assert tick_texts(axes[0].get_xticklabels()) == ["a", "b", "c", "[PAD]"]
    assert axes[1].get_title() == "one\n1 pair (0.2%)"


def test_visible_token_shows_spaces_and_newlines():
    assert P.visible_token(" Paris") == "␣Paris"
    assert P.visible_token("a\nb") == "a↵b"


def test_tile_schedule_colours_computed_and_skipped_tiles():
    Tr = Tc = 4
    computed = np.tril(np.ones((Tr, Tc), dtype=bool))  # causal: tiles on/below the diagonal
    partial = np.eye(Tr, dtype=bool)  # the diagonal tiles hold the mask's edge
    fig, ax = P.tile_schedule(computed, partial=partial, Br=16, Bc=16, order=True)
    im = ax.images[0]
    rgba = im.to_rgba(im.get_array())
    expect = np.where(partial[..., None], to_rgba(P.PARTIAL_COLOR),
                      np.where(computed[..., None], to_rgba(P.ON_COLOR), to_rgba(P.OFF_COLOR)))
    np.testing.assert_allclose(rgba, expect, atol=1 / 255)
    assert ax.get_title() == "10 of 16 tiles computed"
    # loop order: row by row over computed tiles only, 1 … 10
    assert [t.get_text() for t in ax.texts] == [str(k) for k in range(1, 11)]
    assert "B_c = 16" in ax.get_xlabel() and "B_r = 16" in ax.get_ylabel()


def test_tile_schedule_numbers_fa1_column_order():
    computed = np.tril(np.ones((3, 3), dtype=bool))
    fig, ax = P.tile_schedule(computed, order="columns")
    # FlashAttention-1: outer loop over key blocks j, inner over query blocks i ≥ j
    want = {(0, 0): "1", (1, 0): "2", (2, 0): "3", (1, 1): "4", (2, 1): "5", (2, 2): "6"}
    got = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert got == want
    with pytest.raises(ValueError, match="'diagonal'"):
        P.tile_schedule(computed, order="diagonal")


def test_curves_draws_lines_and_points_in_matching_colours_on_log_axes():
    n = np.array([256, 512, 1024, 2048])
    quad = n.astype(float) ** 2 * 4  # float32 bytes of an n × n score matrix, by hand
    fig, ax = P.curves(n, {"n² scores": quad}, {"n² scores": quad[[0, 2]]}, x_measured=n[[0, 2]],
                       ylabel="bytes")
    line, pts = ax.lines
    np.testing.assert_array_equal(line.get_ydata(), quad)
    np.testing.assert_array_equal(pts.get_xdata(), [256, 1024])
    assert pts.get_linestyle() == "None" and pts.get_marker() == "o"
    assert line.get_color() == pts.get_color()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # one legend entry per formula (line and dot together) and one saying what dots are
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["n² scores", "dots: measured, lines: formula"]
    assert pts.get_label() == "n² scores (measured)"


def test_online_softmax_trace_plots_the_histories():
    s = np.array([1.0, 3.0, 2.0, 5.0])  # one key per block, by hand:
    m = np.array([1.0, 3.0, 3.0, 5.0])  # running max
    l = np.array([1.0, np.exp(-2) + 1, np.exp(-2) + 1 + np.exp(-1), (np.exp(-2) + 1 + np.exp(-1)) * np.exp(-2) + 1])
    fig, (am, al) = P.online_softmax_trace(m, l, scores=[[x] for x in s], true_max=s.max(),
                                           true_sum=np.exp(s - s.max()).sum())
    np.testing.assert_array_equal(am.lines[0].get_ydata(), m)
    np.testing.assert_allclose(al.lines[0].get_ydata(), l)
    # the dashed reference lines sit where the last step ends
    ref_l = [ln for ln in al.lines if ln.get_linestyle() == "--"][0]
    np.testing.assert_allclose(ref_l.get_ydata()[0], l[-1])


def test_next_token_bars_sorted_most_probable_on_top():
    toks = [" Paris", " the", " a", " Lyon"]
    p = np.array([0.1, 0.2, 0.05, 0.65])
    fig, ax = P.next_token_bars(toks, p, top_k=3, highlight=" Lyon")
    by_height = sorted(zip(ax.get_yticks(), tick_texts(ax.get_yticklabels())), reverse=True)
    assert [t for _, t in by_height] == ["␣Lyon", "␣the", "␣Paris"]  # top to bottom
    bars = sorted(ax.patches, key=lambda b: -b.get_y())  # top first
    assert [b.get_width() for b in bars] == [0.65, 0.2, 0.1]
    assert bars[0].get_facecolor() != bars[1].get_facecolor()  # the highlighted token stands out
    assert bars[1].get_facecolor() == bars[2].get_facecolor()


def test_save_writes_reproducible_png_without_software_chunk(tmp_path):
    def draw():
        fig, _ = P.attention_heatmap(np.array([[0.5, 0.5], [0.1, 0.9]]), ["x", "y"], ["x", "y"])
        return fig

    p1 = P.save(draw(), tmp_path / "sub" / "a.png")
    p2 = P.save(draw(), tmp_path / "b.png")
    b1, b2 = p1.read_bytes(), p2.read_bytes()
    assert b1 == b2
    chunks = png_chunks(b1)
    texts = [payload for ctype, payload in chunks if ctype in (b"tEXt", b"iTXt", b"zTXt")]
    assert not any(t.startswith(b"Software") for t in texts)
    ihdr = chunks[0][1]
    assert chunks[0][0] == b"IHDR" and int.from_bytes(ihdr[:4], "big") > 300
    # the physical resolution chunk records the fixed dpi (pixels per metre)
    phys = dict(chunks)[b"pHYs"]
    assert round(int.from_bytes(phys[:4], "big") * 0.0254) == P.DPI
    assert not plt.fignum_exists(1) or matplotlib.get_backend().lower() != "agg"


def test_the_saved_path_is_a_path_that_a_notebook_does_not_echo(tmp_path):
    """A lesson's figure cell ends with P.save(…): IPython's own formatter shows a plain Path as text, and nothing
    for the path save returns (the figure above it is the cell's output)."""
    formatters = pytest.importorskip("IPython.core.formatters")
    fig, _ = P.attention_heatmap(np.array([[0.5, 0.5], [0.1, 0.9]]), ["x", "y"], ["x", "y"])
    saved = P.save(fig, tmp_path / "a.png")
    assert isinstance(saved, Path) and saved == tmp_path / "a.png" and saved.is_file()
    shown = formatters.DisplayFormatter()
    assert "text/plain" in shown.format(tmp_path / "a.png")[0]
    assert shown.format(saved) == ({}, {})


def test_save_with_a_palette_keeps_the_cells_and_is_smaller(tmp_path):
    """colors=N: the flat cells keep their colour (against the full-colour PNG), the bytes repeat, no Software chunk."""
    from PIL import Image

    def draw():
        fig, ax = P.new_figure(figsize=(8, 4))
        ax.imshow(np.arange(32).reshape(4, 8), cmap="tab20b", interpolation="nearest")
        for (i, j), v in np.ndenumerate(np.arange(32).reshape(4, 8)):
            ax.text(j, i + 0.3, str(v), ha="center", fontsize=7, color="white")
        ax.set_axis_off()
        return fig

    plain = P.save(draw(), tmp_path / "plain.png")
    small = P.save(draw(), tmp_path / "small.png", colors=64)
    assert small.read_bytes() == P.save(draw(), tmp_path / "again.png", colors=64).read_bytes()
    assert small.stat().st_size < plain.stat().st_size
    chunks = png_chunks(small.read_bytes())
    assert not [c for c, _ in chunks if c in (b"tEXt", b"iTXt", b"zTXt")]
    assert round(int.from_bytes(dict(chunks)[b"pHYs"][:4], "big") * 0.0254) == P.DPI
    a = np.asarray(Image.open(plain).convert("RGB"), dtype=int)
    b = np.asarray(Image.open(small).convert("RGB"), dtype=int)
    assert a.shape == b.shape
    h, w = a.shape[:2]  # the axes fill the tight box: sample the 32 cell centres, above their labels
    centres = [(int((i + 0.25) * h / 4), int((j + 0.5) * w / 8)) for i in range(4) for j in range(8)]
    assert max(np.abs(a[y, x] - b[y, x]).max() for y, x in centres) <= 4
    assert len({tuple(a[y, x]) for y, x in centres}) == 20  # tab20b's 20 colours, still all told apart
    assert len({tuple(b[y, x]) for y, x in centres}) == 20


def test_figures_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRANSFORMER_FIGURES", str(tmp_path))
    assert P.figure_path("x.png") == tmp_path / "x.png"
    monkeypatch.delenv("TRANSFORMER_FIGURES")
    assert P.figures_dir().name == "figures"
    monkeypatch.setenv("TRANSFORMER_FAST", "1")
    assert P.fast()
    monkeypatch.setenv("TRANSFORMER_FAST", "0")
    assert not P.fast()


def pixel_at(fig, ax, x, y):
    """The RGB (0…1) drawn at data point (x, y) of ax, read from the rendered canvas."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    px, py = ax.transData.transform((x, y))
    return rgba[int(round(rgba.shape[0] - py)), int(round(px)), :3] / 255  # the canvas counts rows from the top


@pytest.mark.parametrize("annotate", [True, False])
def test_masked_cells_are_grey_with_or_without_numbers(annotate):
    # a 3 × 3 causal map: the cell (0, 2) is hidden, (2, 0) holds a weight of 0.0 and is not
    w = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.4, 0.6]])
    fig, ax = P.attention_heatmap(w, annotate=annotate, mask=np.tri(3, dtype=bool), colorbar=False)
    grey = np.array(to_rgba(P.OFF_COLOR)[:3])
    for dx in (-0.3, 0.0, 0.3):  # off-centre too, away from where a number would sit
        np.testing.assert_allclose(pixel_at(fig, ax, 2 + dx, 0.3), grey, atol=2 / 255)  # hidden: grey
        assert pixel_at(fig, ax, 0 + dx, 2.3).min() > 0.95  # a visible weight of 0: white
    texts = {tuple(t.get_position()) for t in ax.texts}
    assert (2, 0) not in texts and ((0, 2) in texts) == annotate  # no number on a hidden cell


def test_heads_over_training_greys_the_hidden_cells():
    maps = np.tile(np.tri(4) / np.arange(1, 5)[:, None], (2, 1, 1, 1))  # [k=2, heads=1, 4, 4], uniform causal
    fig, axes = P.training.heads_over_training(maps, [0, 10], ["head"], list("abcd"), targets={},
                                               mask=np.tri(4, dtype=bool))
    grey = np.array(to_rgba(P.OFF_COLOR)[:3])
    for ax in axes[0]:
        np.testing.assert_allclose(pixel_at(fig, ax, 3, 0.2), grey, atol=2 / 255)
        assert pixel_at(fig, ax, 0, 3.3).max() < 0.95  # a weight of 1/4: blue, not grey nor white
