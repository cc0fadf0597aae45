"""Stage 6 (plots): registered figure kinds and ``build`` (results.csv -> summary, figures, report).

Importing this package registers the figure kinds (``figures``: bars, heatmaps, lines,
histograms; ``recall``: recall_grid; ``bands``: bands, length_curves;
``construction``: construction_heatmaps). ``validate_outputs``
checks a spec's figures, claims and paper values; the CLI calls it in ``validate`` and before
``run`` trains anything.
"""

from . import bands, construction, figures, recall  # noqa: F401  (registers the figure kinds)
from .outputs import Outputs, build, load_table, validate_outputs
from .registry import FIGURE_KINDS, FigureConfig, FigureContext, figure_kind, parse_figure

__all__ = ["FIGURE_KINDS", "FigureConfig", "FigureContext", "Outputs", "build", "figure_kind",
           "load_table", "parse_figure", "validate_outputs"]
