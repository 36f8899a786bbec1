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

# %% tags=["parameters"]
profile = "default"

# %%
from IPython.display import Markdown, display

from uldp.paper import chapters, findings, plots

heart = chapters.ExperimentChapter.load("heart_disease", profile)
display(Markdown(findings.findings_box("heart_disease", heart.verdict_data)))

# %% [markdown]
# The paper's {ref}`Figure 6 <paper-figure-6>`: accuracy (left) and user-level $\epsilon$ (right) on FLamby's
# Fed-Heart-Disease, whose 4 silos (hospitals) are fixed, with 50 or 200 users ($n \approx 10$ and $2.5$ records per
# user) and the uniform (the authors' independent draws, `uniform-with-replacement`: {doc}`differences`) or zipf (80%
# in a primary silo) allocation; logistic regression with 14 parameters, $T = 50$
# rounds, local batch size 4. The paper's reading, common to the small medical datasets: ULDP-AVG is competitive,
# ULDP-AVG-w converges much faster, ULDP-SGD slower; ULDP-NAIVE's $\epsilon$ is small but its utility low;
# ULDP-GROUP-$k$ has good utility when $n$ is small but a very large $\epsilon$.
#
# The paper's settings for this figure and every other: {doc}`settings`.

# %% [markdown]
# ## Where the results come from
#
# Folded below: where the results come from, their scale, and what ran (the settings, seeds and run arguments).

# %% tags=["hide-output"]
heart.introduction()

# %% [markdown]
# ## Figure 6: accuracy and privacy
#
# One row per setting (users, allocation); mean over seeds with a one-std band, then the final values.

# %%
heart.show_figures(
    plots.privacy_utility_figure,
    "Figure 6",
    look="Accuracy (first panel) and the user-level $\\epsilon$ (second, log scale) against the round: "
    "compare the methods' accuracy at the end with the $\\epsilon$ each reaches.",
)

# %% [markdown]
# ## What to conclude
#
# HeartDisease is small: FLamby's pooled training records over four hospitals and a 14-parameter model. DEFAULT and
# ULDP-NAIVE do not read the users, so their numbers repeat in every setting (one run per seed serves all four).
# The paper's claims that read {ref}`Figure 6 <paper-figure-6>`, judged on its results alone, then (folded) the runs
# worth a look, and the Scorecard's rows.

# %%
display(Markdown(findings.conclusions("heart_disease", heart.verdict_data)))

# %% [markdown]
# Run by run (folded): runs that end at a trivial level, lines whose seeds spread widely, runs shared between
# settings, and the run time.

# %% tags=["hide-output"]
heart.conclusions()

# %%
heart.claims()
