# %% [markdown]
# # ULDP-FL, reproduced and checked
#
# This book reproduces, checks and extends {cite:t}`kato2024uldpfl`, *ULDP-FL: Federated Learning with Across-Silo
# User-Level Differential Privacy* (VLDB). Every number and figure in it is computed by the small `uldp` library
# that lives beside the book; the chapters only call it, explain and plot. This page says what the paper claims,
# what holds, what is wrong in it, what this project adds and where its results stop; each section links the
# chapter that shows it.
#
# ## The paper's three main claims, and what we measured
#
# The paper's methods ULDP-AVG and ULDP-SGD protect every record of a user across all silos. Its results section
# ({ref}`Section 5.2 <paper-section-5-2>`) rests on three claims: the methods give better privacy-utility trade-offs
# than the baselines; the enhanced weighting (ULDP-AVG-w) makes ULDP-AVG converge much faster; and ULDP-AVG converges
# faster than ULDP-SGD. Below, each claim's verdict over all stored results, then dataset by dataset, with what was
# measured and the scale of the results it rests on. Computed when this page is built, by the same functions and from
# the same stored results as the {doc}`scorecard`, which judges every claim of the section and explains the rules.

# %% tags=["parameters"]
profile = "default"

# %%
from IPython.display import Markdown, display

from uldp.data import load
from uldp.paper import chapters, errata, plots, scorecard

data = scorecard.stored_results(profile)
verdicts = chapters.Verdicts.judge(data)
display(chapters.main_findings(verdicts))
display(
    Markdown(
        chapters.verdict_counts(list(verdicts.overall["verdict"]))
        + " The {doc}`scorecard` shows each one, for all results and per dataset."
    )
)

# %% [markdown]
# The main figure: the privacy-utility trade-off on HeartDisease (FLamby's four hospitals; the paper's
# {ref}`Figure 6 <paper-figure-6>`), one setting of users and allocation. The {doc}`exp_heart_disease` chapter shows
# every setting.

# %%
main = data["heart_disease"]
chapters.show_figure(
    main.only_panels(main.covered_panels()[:1]) if main.covered_panels() else main,
    plots.privacy_utility_figure,
    "Figure 6",
    "Accuracy (left) and the user-level $\\epsilon$ (right, log scale) against the round: compare "
    "ULDP-AVG-w and ULDP-SGD with the baselines at the end of training, and how far right each "
    "method's $\\epsilon$ climbs.",
)

# %% [markdown]
# ## What is wrong in the paper
#
# The library does the correct thing in each case; the chapter named shows why.

# %%
display(
    Markdown(
        "\n".join(
            f"- **{erratum.where}**. The paper: {erratum.paper}. What holds: {erratum.correct} "
            f"(`{erratum.library}`; {{doc}}`{erratum.chapter.removeprefix('book/')}`)."
            for erratum in errata.ERRATA
        )
    )
)
figure2 = errata.figure2_erratum()
display(
    Markdown(
        "Figure 2's group $\\epsilon$, recomputed: "
        + "; ".join(
            f"at $k = {row['k']}$, {row['paper']:,.0f} with the paper's orders and {row['valid']:,.0f} with valid ones"
            for row in figure2
        )
        + "."
    )
)

# %% [markdown]
# ## What this project adds beyond the paper
#
# - {doc}`tighter_accounting`: a privacy-loss-distribution (PLD) accountant beside the paper's RDP, and ULDP-GROUP-$k$
#   accounted directly as a mixture of Gaussians rather than through group privacy; what the smaller $\sigma$ at equal
#   $\epsilon$ buys in utility is judged like a claim of the paper (the last table of the {doc}`scorecard`).
# - {doc}`auditing`: the user-level guarantee audited with canary users, as a lower bound on $\epsilon$ against the
#   accountant's upper bound.
# - {doc}`deploying`: one process per silo on Flower, with the private weighting protocol between real parties.
# - {doc}`your_own_silos`: `uldp.fit` on a federation of one's own records, users and silos.
# - {doc}`differences`: every deliberate difference from the paper and the authors' code, measured.
#
# ## Where the results stop
#
# Most figures are reproduced at the paper's settings, with results committed under `results/`. Two limits:

# %%
chapters.limits(data, load("creditcard"))

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
# **The paper's method**
#
# | paper | chapter | what it shows |
# |---|---|---|
# | {ref}`Section 2.2 <paper-section-2-2>`, {ref}`Figure 2 <paper-figure-2>` | {doc}`group_privacy` | why record-level DP does not scale to users, and an erratum in the figure |
# | {ref}`Section 2 <paper-section-2>` and {ref}`Section 3 <paper-section-3>` | {doc}`users_across_silos` | the datasets and how records are spread over users and silos |
# | {ref}`Section 3.3 <paper-section-3-3>`, {ref}`Algorithm 1 <paper-algorithm-1>`, {ref}`Algorithm 2 <paper-algorithm-2>` | {doc}`baselines` | ULDP-NAIVE and ULDP-GROUP-k, and their guarantees |
# | {ref}`Section 3.4 <paper-section-3-4>`, {ref}`Algorithm 3 <paper-algorithm-3>`, {ref}`Algorithm 4 <paper-algorithm-4>` | {doc}`uldp_avg_sgd` | per-user clipping, sensitivity, user sampling |
# | {ref}`Section 4 <paper-section-4>` | {doc}`weighting_protocol` | {ref}`Protocol 1 <paper-protocol-1>` run between real roles, checked exact and timed |
#
# **The paper's experiments** ({ref}`Section 5 <paper-section-5>`): one chapter per figure,
# {doc}`exp_creditcard`, {doc}`exp_mnist`, {doc}`exp_heart_disease`, {doc}`exp_tcga_brca`, {doc}`exp_weighting` and
# {doc}`exp_user_sampling`, then the {doc}`scorecard` of every claim.
#
# **Beyond the paper**: {doc}`tighter_accounting`, {doc}`auditing`, {doc}`deploying`, {doc}`your_own_silos`.
#
# **Reference**: {doc}`settings`, {doc}`differences`, {doc}`reproducibility`, {doc}`paper_items`, {doc}`bibliography`.
#
# Each chapter is a jupytext notebook (`book/*.py`) with a `profile` parameter: `smoke` (seconds, used by the
# tests), `default` (what the rendered book shows) and `paper` (the paper's settings; results are committed under
# `results/` so the book shows them without retraining).
#
# ## The library in one call
#
# The guarantee of ULDP-AVG with the paper's noise multiplier after 100 rounds, without and with user sampling:

# %% tags=["show-input"]
from uldp.accounting import epsilon_uldp

for q in (1.0, 0.1):
    spent = epsilon_uldp(sigma=5.0, rounds=100, delta=1e-5, q=q)
    print(f"q={q}: epsilon = {spent.epsilon:.3f} (RDP order {spent.order:g})")
