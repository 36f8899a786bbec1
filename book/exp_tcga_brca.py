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
# # TcgaBrca: privacy-utility trade-offs
#
# The paper's {ref}`Figure 7 <paper-figure-7>`: C-index (left) and user-level $\epsilon$ (right) on FLamby's
# Fed-TCGA-BRCA survival data, 6 fixed silos (regions), 50 or 200 users ($n \approx 17$ and $4$), a linear Cox model
# with 40 parameters trained with the Cox partial likelihood, $T = 50$ rounds, local batch size 8. ULDP-GROUP-$k$ uses
# the authors' global learning rate 0.1 and clipping bound 100 on this dataset. Every (user, silo) pair with records has
# at least two (the Cox loss of one record is undefined), as the paper requires for ULDP-AVG's per-user clipping.
#
# The paper's settings for this figure and every other: {doc}`settings`.

# %% tags=["parameters"]
profile = "default"

# %%
from uldp.paper.chapters import ExperimentChapter
from uldp.paper.plots import privacy_utility_figure

tcga = ExperimentChapter.load("tcga_brca", profile)
tcga.introduction()

# %% [markdown]
# ## Figure 7: C-index and privacy
#
# One row per setting (users, allocation); mean over seeds with a one-std band. The C-index of a random score is
# 0.5. The final values follow the figure.

# %%
tcga.show_figures(privacy_utility_figure, "Figure 7")

# %% [markdown]
# ## The paper's claims on TcgaBrca
#
# As in the Scorecard chapter, on its results; the `source` column names them.

# %%
tcga.claims()

# %% [markdown]
# ## What to conclude
#
# TcgaBrca is the noisiest figure: 248 records in the largest silo, a Cox loss whose gradient depends on the whole
# risk set, and a C-index that only ranks. Where ULDP-AVG and ULDP-SGD spread widely over seeds, compare the spread
# with 50 and with 200 users (both are listed below): the noise per round is the same while the clipped signal sums
# over the users, so the fewer users, the more each run follows its own noise draw, and a seed can end near a random
# score's 0.5. ULDP-GROUP-$k$ runs with the authors' clipping bound 100, far above its gradients, so it barely clips
# and stays close to the non-private model, at a very large $\epsilon$. Computed from the results shown:

# %%
tcga.conclusions()
