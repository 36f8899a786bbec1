# %% [markdown]
# # Reproducibility
#
# Everything on this page is computed when the book is built: the commit and package versions that built it, the
# stored results each figure reads, and the commands that re-run a figure. The project's settings document, with
# the facts of the paper's settings and its errata, is `settings.md` beside the paper; the standards and module
# interfaces are in the repository's `CONTRIBUTING.md`.
#
# ## What built this book

# %% tags=["parameters"]
profile = "default"

# %%
from importlib import metadata

import pandas as pd

from uldp.paper import experiments

pd.set_option("display.max_colwidth", None)  # the grids' titles and commands whole
built = experiments.provenance(f"tools/build_book.py --profile {profile}")
commit = built["git_commit"] or "unknown (not a git checkout)"
print(
    f"profile {profile!r}; commit {commit}"
    + (" with local changes" if built["git_dirty"] else "")
    + f"; Python {built['python']} on {built['platform']}, {built['cpu_count']} CPUs"
)

book_packages = (
    "jupyter-book",
    "sphinx-mathjax-offline",
    "sphinxcontrib-bibtex",
    "jupytext",
    "papermill",
    "matplotlib",
    "pandas",
    "scikit-learn",
    "lifelines",
    "dp-accounting",
    "flwr",
)
versions = dict(built["packages"])
for name in book_packages:
    try:
        versions[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        versions[name] = None
pd.DataFrame({"version": versions}).rename_axis("package")

# %% [markdown]
# Every stored result carries the same record for the run that produced it (its command, commit, packages, machine,
# date and wall time) under `provenance` in its JSON file.
#
# ## What each figure reads, and how to re-run it
#
# A figure is a named grid: each of the paper's experiment figures,
# {ref}`Figures 4 <paper-figure-4>` to {ref}`11 <paper-figure-11>`, is one (the page of the paper's numbered items names
# the chapter that shows each). `uldp grid NAME --profile PROFILE` runs the runs of a grid that are not stored yet and
# stores one JSON file per run (resumable: the same command continues an interrupted grid); the chapter then reads them.
# The table counts the runs stored for each grid at each profile in this checkout.

# %%
experiments.stored_runs_table()

# %% [markdown]
# To re-run one figure at the book's scale and rebuild its chapter:
#
# ```bash
# uldp grid heart_disease --profile default          # stores under _build/results/heart_disease/
# .venv/bin/python tools/build_book.py --profile default --only book/exp_heart_disease
# ```
#
# `--dry-run` lists what a grid would run, with the time it took at the other seeds, and `--methods` /
# `--datasets` / `--where PARAMETER=VALUE` / `--seeds` run part of it. One run alone: `uldp run --dataset heart_disease --method ULDP-AVG-w
# --users 50 --rounds 50 --seed 0 --json` (one JSON document on standard output, its inputs with its outputs).
# The whole book: `make book`; the tests and every chapter at the smoke profile: `make test`.
