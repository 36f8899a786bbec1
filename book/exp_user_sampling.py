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
# # User-level sub-sampling
#
# With Poisson sampling of users at rate $q$ in every round (Algorithm 4; the loop zeroes the weights of the users
# *not* sampled, see the errata in settings.md), ULDP-AVG-w's guarantee is that of the sub-sampled Gaussian mechanism:
# a smaller $q$ gives a smaller $\epsilon$, while each round uses fewer users. The paper's Figure 9 shows the
# sub-sampling trade-off on Creditcard (1000 users, zipf, $q \in \{0.1, 0.3, 0.5, 0.7, 1\}$) and MNIST (10000 users,
# zipf, $q \in \{0.1, 0.3, 0.5, 1\}$): the utility loss is acceptable on Creditcard up to about $q = 0.7$, and small
# on MNIST, where the many users make sub-sampling cheap.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp import experiments, plots, scorecard
from uldp.verdicts import profile_label

pd.set_option("display.max_colwidth", None)
GRID = "user_sampling"
shown = experiments.chapter_results(GRID, profile)
display(Markdown(shown.note))
display(Markdown(f"Scale of the results shown: **{profile_label(shown.results)}**."))

# %% [markdown]
# ## What ran

# %%
settings = experiments.grid_table(GRID, shown.results.profile)
print("every run:", settings.attrs["constant"])
print("panels:   ", "; ".join(settings.attrs["panels"]))
print("seeds:    ", settings.attrs["seeds"])
settings

# %% [markdown]
# ## Figure 9: accuracy and privacy for each sampling rate
#
# One row per dataset; one line per $q$. Mean over seeds with a one-std band.
#
# A second figure, when there is one, shows the panels that paper-profile results cover whole (see the note at
# the top).

# %%
plots.chapter_figures(shown, plots.user_sampling_figure)
plt.show()

# %% [markdown]
# Final accuracy (mean ± std over seeds) and $\epsilon$ per sampling rate:

# %%
scorecard.final_table(shown.results)

# %% [markdown]
# About 9% of Creditcard's rows are frauds, so an accuracy near 0.909 can mean a model that finds none; the balanced
# accuracy (the authors' ROC-AUC of hard labels, see the Creditcard chapter) shows what each rate still finds. For the
# results above and, when there are some, the paper-profile panels:

# %%
for results in (shown.results, shown.paper_panels):
    if results is not None:
        display(Markdown(f"Balanced accuracy, {results.profile} profile:"),
                scorecard.final_table(results, "balanced_accuracy"))

# %% [markdown]
# ## The paper's claims

# %%
scorecard.scorecard({GRID: shown.results}, grid=GRID)[["claim", "measured", "verdict"]]
