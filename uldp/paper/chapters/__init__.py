"""What the book's chapters show, one call per figure, table and paragraph, by the chapters that read it.

- :mod:`~uldp.paper.chapters.experiment`: the experiment chapters (``book/exp_*.py``), :class:`ExperimentChapter`.
- :mod:`~uldp.paper.chapters.figure_extras`: what single experiment chapters add beside their main figure.
- :mod:`~uldp.paper.chapters.captions`: a numbered, captioned figure (every chapter).
- :mod:`~uldp.paper.chapters.panels`: a figure of several panels as separate images, laid out by the page's width.
- :mod:`~uldp.paper.chapters.views` and :mod:`~uldp.paper.chapters.opening`: the Scorecard's views, the Scorecard
  chapter and the opening page.
- :mod:`~uldp.paper.chapters.methods`: the method chapters' short comparisons and Protocol 1's measurements.
- :mod:`~uldp.paper.chapters.diagram`: users, silos, server and Protocol 1's messages; the glossary of symbols.
- :mod:`~uldp.paper.chapters.reference`: the reference pages' tables and the paper's settings file.

Import the names from the package (``from uldp.paper.chapters import show_captioned``).
"""

from __future__ import annotations

from uldp.paper.chapters.captions import (
    METADATA_KEY,
    SAVE_DPI,
    captioned,
    figure_metadata,
    show_captioned,
)
from uldp.paper.chapters.diagram import (
    GLOSSARY,
    PROTOCOL_MESSAGES,
    USER_SILOS,
    glossary,
    protocol_diagram,
)
from uldp.paper.chapters.experiment import (
    CHANCE_METRICS,
    LARGE_SPREAD,
    TRIVIAL_MARGIN,
    UNTRAINED_SHARE,
    ExperimentChapter,
    chance_level,
    chance_metric,
    own_runs_note,
    partial_runs_note,
    per_seed,
    run_time,
    scale_sentence,
    scorecard_metric,
    shared_runs,
    show_figure,
    show_final_table,
    spread_runs,
    trivial_runs,
    untrained,
)
from uldp.paper.chapters.figure_extras import (
    balanced_accuracy_figure,
    final_epsilon_table,
    gpu_round_note,
    short_profile_note,
    show_runtime,
    show_weighting_gaps,
    weighting_gap_table,
)
from uldp.paper.chapters.methods import (
    COMPARE_HEADERS,
    COMPARE_MISSING,
    FLOAT32_BYTES,
    PROTOCOL_BENCHMARK,
    compare_runs,
    noise_against_default,
    protocol_scale_figure,
    protocol_scale_sentences,
    protocol_scale_table,
    show_protocol_scale,
    show_stored_runtime,
)
from uldp.paper.chapters.opening import (
    Verdicts,
    claim_chapters,
    claim_findings,
    class_labels,
    limits,
    scorecard_markdown,
    scorecard_tabs,
    verdict_counts,
)
from uldp.paper.chapters.panels import (
    MOST_COLUMNS,
    PANEL_WIDTH,
    PanelImage,
    grid_columns,
    key_image,
    panel_metadata,
    panels_of,
    split_panels,
)
from uldp.paper.chapters.reference import (
    SETTINGS_FILE,
    benchmark_result,
    datasets_table,
    figures_table,
    settings_file,
    settings_source,
    show_grid_settings,
)
from uldp.paper.chapters.views import (
    SCORECARD_VIEWS,
    ScorecardView,
    view_scorecard,
)

__all__ = [
    "CHANCE_METRICS",
    "COMPARE_HEADERS",
    "COMPARE_MISSING",
    "FLOAT32_BYTES",
    "GLOSSARY",
    "LARGE_SPREAD",
    "METADATA_KEY",
    "MOST_COLUMNS",
    "PANEL_WIDTH",
    "PROTOCOL_BENCHMARK",
    "PROTOCOL_MESSAGES",
    "SAVE_DPI",
    "SCORECARD_VIEWS",
    "SETTINGS_FILE",
    "TRIVIAL_MARGIN",
    "UNTRAINED_SHARE",
    "USER_SILOS",
    "ExperimentChapter",
    "PanelImage",
    "ScorecardView",
    "Verdicts",
    "balanced_accuracy_figure",
    "benchmark_result",
    "captioned",
    "chance_level",
    "chance_metric",
    "claim_chapters",
    "claim_findings",
    "class_labels",
    "compare_runs",
    "datasets_table",
    "figure_metadata",
    "figures_table",
    "final_epsilon_table",
    "glossary",
    "gpu_round_note",
    "grid_columns",
    "key_image",
    "limits",
    "noise_against_default",
    "own_runs_note",
    "panel_metadata",
    "panels_of",
    "partial_runs_note",
    "per_seed",
    "protocol_diagram",
    "protocol_scale_figure",
    "protocol_scale_sentences",
    "protocol_scale_table",
    "run_time",
    "scale_sentence",
    "scorecard_markdown",
    "scorecard_metric",
    "scorecard_tabs",
    "settings_file",
    "settings_source",
    "shared_runs",
    "short_profile_note",
    "show_captioned",
    "show_figure",
    "show_final_table",
    "show_grid_settings",
    "show_protocol_scale",
    "show_runtime",
    "show_stored_runtime",
    "show_weighting_gaps",
    "split_panels",
    "spread_runs",
    "trivial_runs",
    "untrained",
    "verdict_counts",
    "view_scorecard",
    "weighting_gap_table",
]
