"""The figures' one style: sizes, colours and colour maps, shared by every drawing module."""

DPI = 150  # 150 dpi: a 8-inch-wide figure is 1200 px, sharp on a projector, small on disk
TITLE_SIZE, LABEL_SIZE, TICK_SIZE, ANNOT_SIZE = 15, 13, 11, 10  # points; readable at slide size
WEIGHTS_CMAP = "Blues"  # sequential: weight 0 is white, weight 1 dark blue
SCORES_CMAP = "RdBu_r"  # diverging: negative blue, 0 white, positive red
ON_COLOR = "#1f4e79"  # attended pair / computed tile (dark blue)
OFF_COLOR = "#e6e6e6"  # hidden pair / skipped tile (light grey)
PARTIAL_COLOR = "#7fb3d5"  # tile computed with a mask inside it (the diagonal of a causal mask)
LINE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def style_axes(ax, title=None, xlabel=None, ylabel=None, *, grid=False):
    """The common sizes on an axes: title, axis labels, tick labels, optional grid."""
    if title is not None:
        ax.set_title(title, fontsize=TITLE_SIZE)
    if xlabel is not None:
        ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.tick_params(labelsize=TICK_SIZE)
    if grid:
        ax.grid(True, which="major", alpha=0.3)
    return ax
