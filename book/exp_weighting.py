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
# # Enhanced weighting: ULDP-AVG vs ULDP-AVG-w
#
# ULDP-AVG weights every user's clipped update in every silo by $w_{s,u} = 1/|S|$; ULDP-AVG-w uses
# $w_{s,u} = n_{s,u} / N_u$ (the share of user $u$'s records held by silo $s$), computed privately by the weighting protocol. Both have
# the same user-level sensitivity, hence the same $\epsilon$. The paper's Figure 8 compares the two weightings' test
# loss on Creditcard (1000 users; 5, 20 and 50 silos; uniform and zipf) and states that equal weights waste signal
# when a user's records are skewed across silos (zipf), and more so with more silos, since every weight
# $1/|S|$ gets smaller. We add TcgaBrca (200 users, 6 silos), as in settings.md.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp import experiments, plots, scorecard
from uldp.verdicts import profile_label

pd.set_option("display.max_colwidth", None)
GRID = "weighting"
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
# ## Figure 8: test loss
#
# One panel per dataset and number of silos; solid lines for the uniform allocation, dashed for zipf. Mean over
# seeds with a one-std band.
#
# A second figure, when there is one, shows the panels that paper-profile results cover whole (see the note at
# the top).

# %%
plots.chapter_figures(shown, plots.weighting_figure)
plt.show()

# %% [markdown]
# The gain of the weighting: final test loss of ULDP-AVG minus that of ULDP-AVG-w (positive means ULDP-AVG-w is
# better), per dataset, number of silos and allocation:

# %%
gaps = scorecard.weighting_gaps({GRID: shown.results})
gaps.pivot_table(index=["dataset", "n_silos"], columns="distribution", values="gap")

# %% [markdown]
# ## The paper's claims

# %%
scorecard.scorecard({GRID: shown.results}, grid=GRID)[["claim", "measured", "verdict"]]

# %% [markdown]
# ## What the private weighting costs (Figure 10)
#
# ULDP-AVG-w needs $n_{s,u} / N_u$, which no silo may learn for another silo's users; the private weighting protocol
# (Protocol 1, see the chapter on the weighting protocol) computes the weighted sum under Paillier encryption. The
# paper times one round on HeartDisease and TcgaBrca, zipf, 10 and 100 users, 3072-bit keys: the silos' local
# training with the encrypted weighting dominates and grows with the users. These runs use the protocol-backed
# aggregation of `uldp.secure` inside the simulation (`secure=True`).

# %%
runtime = experiments.chapter_results("protocol_runtime", profile)
display(Markdown(runtime.note))
plots.runtime_figure(runtime.results)
plt.show()
plots.runtime_table(runtime.results).round(3)
