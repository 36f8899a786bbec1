# %% [markdown]
# # ULDP-FL, reproduced and checked
#
# This book reproduces, checks and extends Kato, Xiong, Takagi, Cao and Yoshikawa, *ULDP-FL: Federated Learning
# with Across-Silo User-Level Differential Privacy* (VLDB). Every number and figure in it is computed by the small
# `uldp` library that lives beside the book; the chapters only call it, explain and plot.
#
# ## The findings at a glance
#
# Computed when this page is built, by the same functions and from the same stored results as the {doc}`scorecard`
# chapter, which lists every claim of the paper's results section ({ref}`Section 5.2 <paper-section-5-2>`) with what we
# measured.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp.paper import errata, plots, scorecard

pd.set_option("display.max_colwidth", None)
data = scorecard.stored_results(profile)
claims = scorecard.scorecard(data)
claims.index = [claim.key for claim in scorecard.CLAIMS]
counts = claims["verdict"].value_counts()
display(Markdown(f"Of the paper's {len(claims)} claims, " + ", ".join(
    f"**{count}** {'hold' if verdict == scorecard.HOLDS else verdict}" for verdict, count in counts.items()) + "."))

# %% [markdown]
# The three claims that carry the paper: its methods beat the baselines, its enhanced weighting speeds up ULDP-AVG,
# and ULDP-AVG beats ULDP-SGD (the `source` column says which stored results each verdict rests on):

# %%
claims.loc[["tradeoff", "avg-w-faster", "avg-vs-sgd"], ["where", "claim", "measured", "verdict", "source"]]

# %% [markdown]
# The errata of the paper that the library corrects (each chapter named explains one; `uldp.paper.errata` lists them):

# %%
display(Markdown("\n".join(
    f"- **{erratum.where}**. The paper: {erratum.paper}. What holds: {erratum.correct} "
    f"(`{erratum.library}`; chapter `{erratum.chapter}`)." for erratum in errata.ERRATA)))
figure2 = errata.figure2_erratum()
display(Markdown("Figure 2's group epsilons, recomputed: " + "; ".join(
    f"k = {row['k']}: {row['paper']:,.0f} with the paper's orders, {row['valid']:,.0f} with valid ones"
    for row in figure2) + "."))

# %% [markdown]
# The main figure: the privacy-utility trade-off on HeartDisease (FLamby's four hospitals; the paper's
# {ref}`Figure 6 <paper-figure-6>`), one setting of users and allocation, utility on the left and the user-level
# $\epsilon$ on the right. Its title names the profile of the results drawn; the {doc}`exp_heart_disease` chapter shows
# every setting.

# %%
main = data["heart_disease"]
if main.runs:
    plots.privacy_utility_figure(main.only_panels(main.covered_panels()[:1]) if main.covered_panels() else main)
    plt.show()
else:
    print(f"no stored HeartDisease results at the {profile} profile yet: the experiment chapter runs them")

# %% [markdown]
# ## The problem: one person, many silos
#
# In cross-silo federated learning a few institutions (hospitals, banks) train one model together without pooling
# their data. Differentially private cross-silo FL usually protects *records*: each silo runs DP-SGD and the
# guarantee says one record cannot be told apart. But a person often has records in several silos (a patient
# treated at two hospitals, a customer of two banks) and many records in each. Record-level DP then under-protects
# people: the guarantee for all of a person's records degrades with their number (group privacy), and that number
# is unbounded and unknown to any single silo.
#
# *User-level* DP (ULDP) protects everything one user contributes, across all silos. The paper gives
#
# - two baselines: **ULDP-NAIVE** (clip each silo's update, noise scaled to all silos) and **ULDP-GROUP-k**
#   (keep at most $k$ records per user, run record-level DP-SGD in each silo, convert by group privacy);
# - its methods **ULDP-AVG** and **ULDP-SGD**: per-user, per-silo clipping with weights $w_{s,u}$ that sum to one
#   over silos for every user, so one user changes the aggregate by at most $C$, with noise
#   $\sigma C / \sqrt{|S|}$ per silo;
# - enhanced weights $w_{s,u} = n_{s,u} / N_u$ (**ULDP-AVG-w**) and user-level Poisson sub-sampling;
# - a **private weighting protocol** (Paillier encryption, secure aggregation, multiplicative blinding) that
#   applies those weights without any party learning another silo's per-user counts.
#
# ## How to read this book
#
# | paper | chapter | what it shows |
# |---|---|---|
# | {ref}`Section 2.2 <paper-section-2-2>`, {ref}`Figure 2 <paper-figure-2>` | Group privacy degradation | why record-level DP does not scale to users, and an erratum in the figure |
# | {ref}`Section 2 <paper-section-2>` and {ref}`Section 3 <paper-section-3>` data model | Users across silos | the datasets and how records are spread over users and silos |
# | {ref}`Section 3.3 <paper-section-3-3>`, {ref}`Algorithm 1 <paper-algorithm-1>` and {ref}`Algorithm 2 <paper-algorithm-2>` | Baselines | ULDP-NAIVE and ULDP-GROUP-k, and their guarantees |
# | {ref}`Section 3.4 <paper-section-3-4>`, {ref}`Algorithm 3 <paper-algorithm-3>` and {ref}`Algorithm 4 <paper-algorithm-4>` | ULDP-AVG and ULDP-SGD | per-user clipping, sensitivity, user sampling |
# | {ref}`Section 4 <paper-section-4>` | The private weighting protocol | {ref}`Protocol 1 <paper-protocol-1>` run between real roles, checked exact and timed |
# | {ref}`Section 5 <paper-section-5>` | one chapter per figure | the experiments re-run, and a scorecard of the paper's claims |
# | all | How this reproduction differs | every deliberate difference from the paper and the authors' code, measured |
#
# Each chapter is a jupytext notebook (`book/*.py`) with a `profile` parameter: `smoke` (seconds, used by the
# tests), `default` (what the rendered book shows) and `paper` (the paper's settings; results are committed under
# `results/` so the book shows them without retraining).
#
# ## The library in one call
#
# The guarantee of ULDP-AVG with the paper's noise multiplier after 100 rounds:

# %% tags=["show-input"]
from uldp.accounting import epsilon_uldp

for q in (1.0, 0.1):
    spent = epsilon_uldp(sigma=5.0, rounds=100, delta=1e-5, q=q)
    print(f"ULDP-AVG, sigma=5, T=100, q={q}: epsilon = {spent.epsilon:.3f} at delta = 1e-5 (RDP order {spent.order:g})")
