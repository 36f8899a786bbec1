"""The reference pages' tables (``book/settings.py``, ``book/differences.py``): the grids' settings, the datasets,
the figures, the committed benchmark results and the paper's settings file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import Markdown, display

from uldp.data import DATASETS
from uldp.models import build_model
from uldp.paper import experiments


def _markdown_value(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def show_grid_settings(grid_name: str, profile: str) -> None:
    """Display the run arguments every run of a grid shares at ``profile``, its settings (panels) and seeds, as a
    Markdown list, then each line's run arguments that differ between lines
    (:func:`uldp.paper.experiments.grid_table`; a
    cell "a / b" lists the values of different settings).

    Raises:
        ValueError: Unknown grid or profile.
    """
    table = experiments.grid_table(grid_name, profile)
    shared = ", ".join(
        f"`{name}` = {_markdown_value(value)}" for name, value in table.attrs["constant"].items()
    )
    display(
        Markdown(
            f"- every run: {shared}\n- settings (panels): {'; '.join(table.attrs['panels'])}\n"
            f"- seeds: {', '.join(map(str, table.attrs['seeds']))}"
        ),
        # a Styler shows each cell whole (a DataFrame's HTML cuts text past 50 characters) and no index column
        table.reset_index()
        .rename(columns=lambda name: str(name).replace("_", " "))
        .style.hide(axis="index"),
    )


def benchmark_result(name: str) -> dict[str, Any]:
    """The committed result of ``benchmarks/<name>.py`` (``benchmarks/results/<name>.json``, written with its
    provenance by ``benchmarks/save.py``): ``{"provenance": ..., "results": ...}``.

    Raises:
        FileNotFoundError: No committed result of that name (the message says how to make it).
    """
    path = experiments.REPO_ROOT / "benchmarks" / "results" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no committed benchmark result {path}; run `python benchmarks/save.py {name}`"
        )
    with open(path, encoding="utf-8") as handle:
        return dict(json.load(handle))


def datasets_table() -> pd.DataFrame:
    """The datasets of the paper's experiments as :mod:`uldp.data` registers them and :mod:`uldp.models` builds
    their models: silos, whether the silos are fixed by the data, the model's parameter count and the utility
    metric of the figures."""
    rows = []
    for name, spec in DATASETS.items():
        model = build_model(name)
        rows.append(
            {
                "dataset": name,
                "description": spec.description,
                "silos": spec.default_silos,
                "silos fixed by the data": spec.fixed_silos,
                "model": type(model).__name__,
                "parameters": sum(p.numel() for p in model.parameters()),
                "metric": experiments.UTILITY_METRIC.get(name, "accuracy"),
            }
        )
    return pd.DataFrame(rows).set_index("dataset")


def figures_table() -> pd.DataFrame:
    """Every grid: the paper's figure it reproduces, what it shows, and how many runs its paper profile has."""
    return pd.DataFrame(
        [
            {
                "grid": name,
                "figure": grid.figure,
                "shows": grid.title,
                "paper-profile runs": len(experiments.expand(name, "paper")),
            }
            for name, grid in experiments.GRIDS.items()
        ]
    ).set_index("grid")


# ------------------------------------------------------------------------------------------ the settings file

#: Where the paper's settings file is looked for: ``paper/settings.md`` in the ``shared`` folder beside the checkout,
#: then beside the data folder (``$ULDP_DATA_DIR/../paper``).
SETTINGS_FILE = Path("paper") / "settings.md"
#: The HTML class of a block that quotes a file as it is (``tools/check_pages.py`` reads it as the file's words).
QUOTED = "quoted-file"


def settings_file(data_dir: str | Path | None = None, checkout: Path | None = None) -> Path | None:
    """The paper's settings file (:data:`SETTINGS_FILE`) beside the checkout or the data folder, or ``None``.

    Args:
        data_dir: The data folder (default: ``$ULDP_DATA_DIR``, if set).
        checkout: The repository's root (default: this one's).
    """
    checkout = checkout or Path(__file__).resolve().parents[2]
    data_dir = data_dir if data_dir is not None else os.environ.get("ULDP_DATA_DIR")
    candidates = [checkout.parent / "shared" / SETTINGS_FILE]
    candidates += [Path(data_dir).parent / SETTINGS_FILE] if data_dir else []
    return next((path for path in candidates if path.is_file()), None)


def settings_source(path: Path | None) -> Markdown:
    """The settings file verbatim, folded (a dropdown the reader opens), or a message saying where it was looked
    for when ``path`` is ``None`` (no local path is printed). The file's block carries the class :data:`QUOTED`:
    its words are the collector's, which ``tools/check_pages.py`` does not judge as the book's outputs."""
    if path is None:
        return Markdown(
            f"The paper's settings file (`{SETTINGS_FILE.name}`) is not in this checkout: it is looked for "
            f"as `shared/{SETTINGS_FILE.as_posix()}` beside the checkout and beside the data folder "
            "(`ULDP_DATA_DIR`). The tables above come from the library and do not need it."
        )
    text = path.read_text(encoding="utf-8")
    fence = "`" * max(4, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return Markdown(
        f":::{{dropdown}} The settings file `{SETTINGS_FILE.name}`, verbatim\n"
        f"{fence}{{code-block}} text\n:class: {QUOTED}\n\n{text.rstrip()}\n{fence}\n:::"
    )
