# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # HeartDisease: privacy-utility trade-offs
#
# The paper's Figure 6: accuracy (left) and user-level $\epsilon$ (right) on FLamby's Fed-Heart-Disease, whose 4 silos
# (hospitals) are fixed, with 50 or 200 users ($n \approx 10$ and $2.5$ records per user) and the uniform or zipf
# (80% in a primary silo) allocation; logistic regression with 14 parameters, $T = 50$ rounds, local batch size 4.
# The paper's reading, common to the small medical datasets: ULDP-AVG is competitive, ULDP-AVG-w converges much
# faster, ULDP-SGD slower; ULDP-NAIVE's $\epsilon$ is small but its utility low; ULDP-GROUP-$k$ has good utility
# when $n$ is small but a very large $\epsilon$.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp import experiments, plots, scorecard

pd.set_option("display.max_colwidth", None)
GRID = "heart_disease"
shown = experiments.chapter_results(GRID, profile)
display(Markdown(shown.note))

# %% [markdown]
# ## What ran
#
# The hyperparameters of each method (settings.md; a cell "a / b" lists the values of different settings), then
# what every run shares, the settings (one row of the figure each) and the seeds.

# %%
settings = experiments.grid_table(GRID, shown.results.profile)
print("every run:", settings.attrs["constant"])
print("settings: ", "; ".join(settings.attrs["panels"]))
print("seeds:    ", settings.attrs["seeds"])
settings

# %% [markdown]
# ## Figure 6: accuracy and privacy
#
# One row per setting (users, allocation); mean over seeds with a one-std band.
#
# A second figure, when there is one, shows the panels that paper-profile results cover whole (see the note at
# the top).

# %%
plots.chapter_figures(shown, plots.privacy_utility_figure)
plt.show()

# %% [markdown]
# Final values (last round, mean ± std over seeds) and the user-level $\epsilon$ at $\delta = 10^{-5}$:

# %%
scorecard.final_table(shown.results)

# %% [markdown]
# ## The paper's claims on this dataset
#
# The rows of the Scorecard chapter, measured on this dataset alone (the verdict rules are in
# `uldp.scorecard`; at the smoke and default profiles the runs are far shorter than the paper's, so verdicts there
# say little).

# %%
scorecard.scorecard({GRID: shown.results}, grid=GRID)[["claim", "measured", "verdict"]]
