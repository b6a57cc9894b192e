"""Figures for the lessons: one consistent, slide-readable style for every plot.

Every function draws on the `ax=` it is given (or makes its own figure), returns
`(fig, ax)` (or `(fig, axes)` for multi-panel figures) and never calls `plt.show()`.
`save(fig, path)` writes a reproducible PNG: fixed dpi, no "Software" metadata
chunk, so the same data always gives the same bytes.

Colour maps follow the data: a sequential map for weights (0 = white), a
diverging map centred on 0 for signed scores, two flat colours for masks and
tile schedules (attended/computed vs hidden/skipped).
"""
from __future__ import annotations

from .base import (  # noqa: F401  the shared helpers, one import for the lessons: P.curves, P.save, …
    DPI, TITLE_SIZE, LABEL_SIZE, TICK_SIZE, ANNOT_SIZE, LINE_COLORS, WEIGHTS_CMAP, SCORES_CMAP,
    ON_COLOR, OFF_COLOR, PARTIAL_COLOR, figures_dir, figure_path, fast, visible_token, style_axes,
    new_figure, attention_heatmap, head_grid, mask_gallery, curves, tile_schedule,
    online_softmax_trace, next_token_bars, save, MAX_FIGURE_INCHES, MAX_TICK_LABELS,
)

from .base import __all__  # noqa: F401  the names above

from . import early  # noqa: F401  the drawing helpers of lessons 01–03 (they use the style above)
from . import decoding  # noqa: F401  the drawing helpers of lessons 06–08
from . import late  # noqa: F401  the drawing helpers of lessons 09–17
from . import models  # noqa: F401  the drawing helpers of lessons 11–15
from . import training  # noqa: F401  the drawing helpers of lessons 18–19
