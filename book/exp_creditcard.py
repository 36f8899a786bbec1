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
# # Creditcard: privacy-utility trade-offs
#
# The paper's Figure 4: test accuracy (left) and the accumulated user-level $\epsilon$ (right) of every method on the
# Creditcard fraud data, 5 silos, with 100 or 1000 users and uniform or zipf allocations, $\sigma = 5$,
# $\delta = 10^{-5}$, $T = 100$ rounds. The paper's reading: ULDP-AVG/SGD reach competitive accuracy at a small
# $\epsilon$; ULDP-NAIVE has low accuracy; ULDP-GROUP-$k$ needs a far larger $\epsilon$; ULDP-AVG converges faster
# than ULDP-SGD; a gap to the non-private DEFAULT remains; and with 1000 users (few records each) and uniform
# allocation, ULDP-GROUP-max/median beat ULDP-AVG in accuracy.
#
# The offline Creditcard copy is a 5,412-row subset (all 492 frauds and 4,920 normal rows, see settings.md), so a
# user here has fewer records than the paper's $n \approx 246$ and $25$. Figure 4 plots accuracy, as the paper's
# caption says; the authors' code computes the ROC-AUC of hard labels, which is the balanced accuracy, shown after it.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp import experiments, plots, scorecard
from uldp.verdicts import profile_label

pd.set_option("display.max_colwidth", None)
GRID = "creditcard"
shown = experiments.chapter_results(GRID, profile)
display(Markdown(shown.note))
display(Markdown(f"Scale of the results shown: **{profile_label(shown.results)}**."))

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
# ## Figure 4: accuracy and privacy
#
# One row per setting: users $|U|$ and allocation. Curves are the mean over seeds, bands one standard deviation;
# DEFAULT has no privacy guarantee and no $\epsilon$ curve. ULDP-GROUP-$k$'s $\epsilon$ is the valid group-privacy
# bound (the power of two above $k$, see the group-privacy chapter).
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
# ## Balanced accuracy
#
# About 9% of the rows are frauds, so a model that always answers "normal" has accuracy 0.909 and balanced accuracy
# (the mean of the recalls of both classes) 0.5. Accuracy then hides whether a method finds frauds at all;
# balanced accuracy, what the authors' code computes (the ROC-AUC of hard labels), shows it.

# %%
plots.chapter_figures(shown, lambda results: plots.metric_grid(
    results, ["balanced_accuracy"], title=f"Balanced accuracy: creditcard ({profile_label(results)})"))
plt.show()
scorecard.final_table(shown.results, "balanced_accuracy")

# %% [markdown]
# ## The paper's claims on this dataset
#
# The rows of the Scorecard chapter, measured on this dataset alone (the verdict rules are in
# `uldp.scorecard`; at the smoke and default profiles the runs are far shorter than the paper's, so verdicts there
# say little).

# %%
scorecard.scorecard({GRID: shown.results}, grid=GRID)[["claim", "measured", "verdict"]]
