# %% [markdown]
# # ULDP-FL, reproduced and checked
#
# This book reproduces, checks and extends {cite:t}`kato2024uldpfl`, *ULDP-FL: Federated Learning with Across-Silo
# User-Level Differential Privacy* (VLDB), whose methods protect everything one person contributes across several
# institutions (silos). Every number and figure below is computed, when the page is built, by the small `uldp`
# library beside the book from the stored results; the answers come first, the reasoning after.

# %% tags=["parameters"]
profile = "default"

# %%
from IPython.display import Markdown, display

from uldp.data import load
from uldp.paper import chapters, errata, overview, plots, scorecard

data = scorecard.stored_results(profile)
verdicts = chapters.Verdicts.judge(data)
display(
    Markdown(
        chapters.verdict_counts(list(verdicts.overall["verdict"]))
        + " Each is judged on every stored result at its largest scale; the {doc}`scorecard` gives the rules, what "
        "was measured and the margin of every verdict."
    )
)

# %% [markdown]
# ## The paper's claims, dataset by dataset
#
# Each claim of the paper's results section ({ref}`Section 5.2 <paper-section-5-2>`), judged on each dataset's
# results alone. A verdict says which way the results point: {bdg-success}`holds` (the paper's direction, beyond two
# standard errors over seeds), {bdg-warning}`not shown` (the claim's threshold lies inside that margin),
# {bdg-danger}`contradicted` (the other direction, beyond it) or {bdg-secondary}`not measured`. The number beside a
# verdict is the effect: the median over the dataset's settings of the difference the claim is about (utility
# points, GROUP-$k$'s $\epsilon$ as a multiple of ULDP-AVG's, test loss), each difference paired by seed.

# %%
display(Markdown(overview.claims_table(data)), Markdown(overview.seeds_note(data)))

# %% [markdown]
# ## What to use in practice
#
# Computed from the same results: the method, how to keep the silos' counts private and what it costs, the
# accountant, and when to sample users.

# %%
display(Markdown(overview.practice(data)))

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
    "Accuracy (first panel) and the user-level $\\epsilon$ (second, log scale) against the round: compare "
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
            f"({{doc}}`{erratum.chapter.removeprefix('book/')}`)."
            for erratum in errata.ERRATA
        )
    )
)

# %% [markdown]
# The {ref}`Figure 2 <paper-figure-2>` erratum whole: the group $\epsilon$ of record-level DP-SGD for a group of $k$
# records, as the paper computes it (RDP orders outside the lemma's domain, so no guarantee) and by the three valid
# routes: RDP at orders $\alpha \ge 2k$, the $(\epsilon, \delta)$ group conversion of
# {ref}`Lemma 5 <paper-lemma-5>`, and the privacy-loss distribution of the group's mixture of Gaussians (no
# conversion, {doc}`tighter_accounting`).

# %%
figure2 = errata.figure2_erratum()
display(
    Markdown(
        "| group size $k$ | the paper (invalid orders) | valid RDP | $(\\epsilon, \\delta)$ conversion | PLD |\n"
        "|---|---|---|---|---|\n"
        + "\n".join(
            f"| {row['k']} | {row['paper']:,.0f} | {row['valid']:,.0f} | {row['dp']:,.0f} | {row['pld']:,.0f} |"
            for row in figure2
        )
        + f"\n\nAt $k = {figure2[-1]['k']}$ the paper states {figure2[-1]['paper']:,.0f}; the valid routes give "
        f"{figure2[-1]['dp']:,.0f} by the $(\\epsilon, \\delta)$ conversion and {figure2[-1]['pld']:,.0f} by PLD, "
        f"and the valid RDP route {figure2[-1]['valid']:,.0f}: the paper's value is neither a guarantee nor the "
        "tightest bound."
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
# - {doc}`protocol_in_practice`: how the silos agree on their users privately, what each party learns, what a server
#   that deviates can still do and the $\epsilon$ that holds against each adversary; {ref}`Protocol 1 <paper-protocol-1>`
#   at deep-model scale.
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
# **Beyond the paper**: {doc}`tighter_accounting`, {doc}`auditing`, {doc}`protocol_in_practice`, {doc}`deploying`,
# {doc}`your_own_silos`.
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
