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

# %% tags=["parameters"]
profile = "default"

# %%
from IPython.display import Markdown, display

from uldp.paper import chapters, findings, plots

sampling = chapters.ExperimentChapter.load("user_sampling", profile)
display(Markdown(findings.findings_box("user_sampling", sampling.verdict_data)))

# %% [markdown]
# With Poisson sampling of users at rate $q$ in every round ({ref}`Algorithm 4 <paper-algorithm-4>`; the loop zeroes the
# weights of the users *not* sampled, see the errata on the {doc}`settings page <settings>`), ULDP-AVG-w's guarantee is that of the sub-sampled
# Gaussian mechanism: a smaller $q$ gives a smaller $\epsilon$, while each round uses fewer users. The paper's
# {ref}`Figure 9 <paper-figure-9>` shows the sub-sampling trade-off on Creditcard (1000 users, zipf,
# $q \in \{0.1, 0.3, 0.5, 0.7, 1\}$) and MNIST (10000 users, zipf, $q \in \{0.1, 0.3, 0.5, 1\}$): the utility loss is
# acceptable on Creditcard up to about $q = 0.7$, and small on MNIST, where the many users make sub-sampling cheap.
#
# The paper's settings for this figure and every other: {doc}`settings`.

# %% [markdown]
# ## Where the results come from
#
# Folded below: where the results come from, their scale, and what ran (the settings, seeds and run arguments).

# %% tags=["hide-output"]
sampling.introduction()

# %% [markdown]
# ## Figure 9: accuracy and privacy for each sampling rate
#
# One row per dataset; one line per $q$. Mean over seeds with a one-std band; the final accuracy and $\epsilon$ per
# sampling rate follow.

# %%
sampling.show_figures(
    plots.user_sampling_figure,
    "Figure 9",
    look="User-level sub-sampling at each rate $q$: accuracy (first panel) and the user-level $\\epsilon$ "
    "(second, log scale); a smaller $q$ lowers $\\epsilon$, compare what it costs in accuracy.",
)

# %% [markdown]
# ## Whom the sampled epsilon holds against
#
# The $\epsilon$ of {ref}`Figure 9 <paper-figure-9>` is the paper's: the sub-sampled Gaussian
# ({ref}`Lemma 4 <paper-lemma-4>`), amplified by sampling. Amplification holds only against an adversary that does not
# know which rounds held a user: a reader of the released models. In {ref}`Protocol 1 <paper-protocol-1>` the server draws the sample and sends it (the paper's
# paragraph on private user-level sub-sampling says so). A server that sees the sample has the epsilon of the Gaussian
# mechanism mixed over the rounds that held the user, $\delta(\epsilon) = \sum_k \binom{T}{k} q^k (1-q)^{T-k}
# \,\delta_{\mathrm{Gauss}}(\epsilon; \sqrt{k}/\sigma)$ (`uldp.accounting.epsilon_known_sample`); a server that
# chooses the sample can put a user in every round, and sampling then buys nothing ($q = 1$). Each run's setting, by
# the paper's accountant (RDP), against each adversary:

# %%
import matplotlib.pyplot as plt
import pandas as pd

from uldp.accounting import Adversary, epsilon_for_method
from uldp.paper.chapters import show_captioned

settings = {
    (run["params"]["dataset"], run["params"]["q"]): run["params"] for run in sampling.results.runs
}
adversaries = {
    "readers of the model (the paper's)": Adversary.MODEL_READERS,
    "a server that sees the sample": Adversary.SERVER_SEES_SAMPLE,
    "a server that chooses the sample": Adversary.SERVER_CHOOSES_SAMPLE,
}
against = pd.DataFrame(
    [
        {
            "dataset": dataset,
            "q": q,
            **{
                name: epsilon_for_method(
                    params["method"],
                    sigma=params["sigma"],
                    rounds=params["rounds"],
                    delta=params["delta"],
                    q=q,
                    adversary=adversary,
                ).epsilon
                for name, adversary in adversaries.items()
            },
        }
        for (dataset, q), params in sorted(settings.items())
    ]
)
datasets = sorted(set(against["dataset"]))
fig, axes = plt.subplots(1, len(datasets), figsize=(plots.FIGURE_WIDTH, 4.0), squeeze=False)
for ax, dataset in zip(axes[0], datasets, strict=True):
    rows = against[against["dataset"] == dataset]
    for name, style in zip(adversaries, ("-o", "--s", ":^"), strict=True):
        ax.plot(rows["q"], rows[name], style, label=name)
    ax.set(title=dataset, xlabel="sampling rate $q$", ylabel="user-level $\\epsilon$ after the run")
plots.figure_legend(fig, axes, title=False)
show_captioned(
    fig,
    "Figure 9's epsilon against each adversary: the paper's amplified epsilon (solid) holds against readers of the "
    "model; against the server that draws, hence sees, the sample it is the dashed line, and against a server that "
    "chooses the sample the dotted one, whatever $q$. Look at how far the solid line falls below the dashed one at "
    "small $q$.",
)
against.style.format(precision=3).hide(axis="index")

# %% [markdown]
# Frauds are a small share of Creditcard's rows, so an accuracy near the share of normal rows can mean a model that
# finds none; the balanced accuracy (the authors' ROC-AUC of hard labels, see the {doc}`exp_creditcard` chapter) shows
# what each rate still finds.

# %%
sampling.final_tables("balanced_accuracy")

# %% [markdown]
# ## The paper's claims on sub-sampling

# %%
sampling.claims()

# %% [markdown]
# ## What to conclude
#
# Sub-sampling trades utility for privacy in one direction only: a smaller $q$ always gives a smaller $\epsilon$
# (the accountant's bound falls with $q$ whatever the data), while the utility cost depends on the data. That
# $\epsilon$ holds against readers of the model; against the server that draws the sample, it falls far less with
# $q$ (the figure above), and not at all if the server chooses the sample: only a sample the server cannot see, or a
# silo that charges its rounds as server-chosen (`uldp.policy.SiloPolicy`'s `sampler`), keeps the promise there. A rate whose
# runs end at the accuracy of always answering "normal" has learnt nothing, however close that accuracy looks to the
# others: the claims are judged on the balanced accuracy, and the folded list after them says which runs did so. The
# paper's claims on this figure, judged on its results alone:

# %%
display(Markdown(findings.conclusions("user_sampling", sampling.verdict_data)))

# %% [markdown]
# Run by run (folded): runs that end at a trivial level, lines whose seeds spread widely, runs shared between
# settings, and the run time.

# %% tags=["hide-output"]
sampling.conclusions()
