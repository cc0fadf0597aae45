"""Stage 6 (plots): registered figure kinds and ``build`` (results.csv -> summary, figures, report).

Importing this package registers the figure kinds (``figures``: bars, heatmaps, lines,
histograms; ``recall``: recall_grid; ``mechanistic``: koren2026 Figs. 2-5; ``haar``: haar_wavelet;
``bounds``: bound_grid; ``curves``: learning curves from curves.csv (report.curves), budget
studies included; ``phase``: annotated phase diagrams beside the paper's cell values; ``bands``:
bands, length_curves; ``construction``: construction_heatmaps). ``validate_outputs`` checks a
spec's figures, claims and paper values; the CLI calls it in ``validate`` and before ``run``
trains anything. ``export`` writes the long table across experiments, ``frontpage`` rebuilds
every output and writes results/README.md.
"""

from . import (  # noqa: F401  (registers the figure kinds)
    bands,
    bounds,
    construction,
    curves,
    figures,
    haar,
    mechanistic,
    phase,
    recall,
)
from .outputs import (
    Outputs,
    aggregate_metric_problems,
    build,
    load_table,
    output_paths,
    validate_outputs,
    where_problems,
    write_analytic_table,
)
from .registry import (
    FIGURE_KINDS,
    FigureConfig,
    FigureContext,
    figure_kind,
    parse_figure,
    seed_title_warnings,
)

__all__ = ["FIGURE_KINDS", "FigureConfig", "FigureContext", "Outputs", "aggregate_metric_problems",
           "build", "figure_kind",
           "load_table", "output_paths", "parse_figure", "seed_title_warnings", "validate_outputs",
           "where_problems",
           "write_analytic_table"]
