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
# # MNIST: privacy-utility trade-offs

# %% tags=["parameters"]
profile = "default"

# %%
from IPython.display import Markdown, display

from uldp.paper import chapters, experiments, findings, plots, scorecard

mnist = chapters.ExperimentChapter.load("mnist", profile)
display(Markdown(findings.findings_box("mnist", mnist.verdict_data)))

# %% [markdown]
# The paper's {ref}`Figure 5 <paper-figure-5>`: test loss (left), accuracy (middle) and user-level $\epsilon$ (right) on
# MNIST, 5 silos, 100 or 10000 users, uniform, zipf (iid) and zipf non-iid (at most 2 labels per user) allocations,
# $T = 200$ rounds. Beyond the general picture of Creditcard, the paper reads two things here: with 100 users,
# user-level non-iid data slows ULDP-AVG down, which matters much less with 10000 users; and with 10000 users (about 6
# records each, 60,000 records in all) ULDP-GROUP-2 reaches a reasonably small $\epsilon$, since a small record-level
# sampling rate helps DP-SGD.
#
# ULDP-NAIVE was not run by the authors on MNIST (its utility was too poor); this book runs it anyway, at the
# Creditcard row's shape with $C = 1$.
#
# The paper's settings for this figure and every other: {doc}`settings`.

# %% [markdown]
# ## Where the results come from
#
# Folded below: where the results come from, their scale, and what ran (the settings, seeds and run arguments).

# %% tags=["hide-output"]
mnist.introduction()

# %% [markdown]
# ## Figure 5 with the paper's federations, trained shorter
#
# MNIST's training at the paper's scale is not in the committed results. The `short` profile keeps the paper's
# federations whole (all training records, 100 or 10000 users over 5 silos, the zipf and zipf non-iid allocations, the
# hyperparameters of the {doc}`settings`, the whole test set) and cuts only the training. Its results are committed
# under `results/short/` by `uldp grid mnist --profile short --jobs 2`. They show the start of the paper's curves under
# a lighter local training, not their end: read the gap between iid and non-iid at each user count, which is what the
# paper's non-iid claim is about, not the accuracy itself.

# %%
short = mnist.verdict_data[scorecard.MNIST_SHORT]
chapters.short_profile_note(short)

# %% [markdown]
# A GPU changes that estimate. What one lent for a few minutes measured (`benchmarks/gpu.py`, committed with its
# commit and date as `benchmarks/results/gpu_h200*.json`):

# %%
chapters.gpu_round_note(
    chapters.benchmark_result("gpu_h200"), chapters.benchmark_result("gpu_h200_paper_scale")
)

# %%
chapters.show_figure(
    short,
    plots.privacy_utility_figure,
    "Figure 5 (the paper's federations, short training)",
    "Test loss, accuracy and the user-level $\\epsilon$ (log scale) against the round: compare "
    "ULDP-AVG's accuracy under the zipf and zipf non-iid allocations at each user count.",
)
chapters.show_final_table(short)
mnist.claims(scorecard.MNIST_SHORT)

# %% [markdown]
# ## Training in bfloat16
#
# `precision="bf16"` (`fit`, `RunConfig`, `uldp grid --precision bf16`) runs the local training's forward and
# backward passes under bfloat16 autocast (16-bit floats with float32's exponent range, for hardware with fast
# bfloat16 arithmetic); the parameters, the updates, the clipping and the noise stay in float32, so the guarantee is
# the same. Its cost in accuracy is
# measured on one panel of the short profile: the same runs (same keys and seeds, so the same data, user allocation,
# record order and noise) trained again in bfloat16, by `uldp grid mnist --profile short --where
# n_users=100 distribution=zipf --precision bf16 --root results/short/bf16`, against their float32 runs above. The
# float32 seeds' range is the yardstick:

# %%
bf16_runs = experiments.compare_precisions(
    "mnist",
    "short",
    candidate_root=experiments.results_root("short") / "bf16",
    precision="bf16",
    where={"n_users": ["100"], "distribution": ["zipf"]},
)
display(
    Markdown(
        "\n\n".join(comparison.describe() for comparison in bf16_runs)
        or "No bfloat16 run of MNIST is stored in this checkout."
    )
)

# %% [markdown]
# ## MNIST trained at the paper's scale: Figure 9's sub-sampling endpoints
#
# {ref}`Figure 9 <paper-figure-9>` trains ULDP-AVG-w on MNIST's paper federation (10000 users, zipf) for the paper's
# $T = 200$ rounds of $Q = 50$ local epochs, at several user sampling rates $q$; at $q = 0.1$ a round trains a tenth
# of the users, the cheapest MNIST training at the paper's scale. The runs of it stored so far are drawn here with the
# machine and precision they trained on (the {doc}`exp_user_sampling` chapter puts them beside Creditcard's rates):

# %%
mnist_endpoints = mnist.verdict_data.get(scorecard.in_part("user_sampling"))
if mnist_endpoints is not None and any(
    run["params"]["dataset"] == "mnist" for run in mnist_endpoints.runs
):
    mnist_endpoints = mnist_endpoints.only_panels(["mnist"])
    display(Markdown(chapters.partial_runs_note(mnist_endpoints)))
    chapters.show_figure(
        mnist_endpoints,
        plots.user_sampling_figure,
        "Figure 9",
        "Accuracy (first panel) and the user-level $\\epsilon$ (second, log scale) against the round, "
        "at the paper's scale.",
    )
    chapters.show_final_table(mnist_endpoints)
else:
    display(
        Markdown(
            "No paper-scale MNIST run of Figure 9 (user sub-sampling) is stored in this checkout."
        )
    )

# %% [markdown]
# ## Privacy at the paper's scale, without training
#
# {ref}`Figure 5 <paper-figure-5>`'s paper-scale training is not committed: the estimate above, from the short runs'
# own timings, says why. Its privacy half needs no training: a method's accountant reads only the shape of the
# federation (silos, records per silo after ULDP-GROUP-$k$'s filtering, the group size, $q$, $\sigma$, $\delta$), so
# `uldp.paper.experiments.accounted_results` gives, exactly, the $\epsilon$ after $T = 200$ rounds that every
# paper-profile run would report (checked against trained runs in `tests/test_experiments_results.py`), for the
# allocation of seed 0. This is the right-hand column of {ref}`Figure 5 <paper-figure-5>` at its end point.

# %%
chapters.final_epsilon_table(experiments.accounted_results("mnist"))

# %% [markdown]
# The paper's claim about these numbers, judged on them (ULDP-GROUP-$k$'s $\epsilon$ is the valid group-privacy bound;
# the paper's figures used orders outside {ref}`Lemma 6 <paper-lemma-6>`'s domain, see the group-privacy chapter):

# %%
mnist.claims(scorecard.MNIST_ACCOUNTING)

# %% [markdown]
# ## This build's own runs
#
# What they are for: they run every setting and method of {ref}`Figure 5 <paper-figure-5>` end to end at this page's
# profile, so that the chapter checks the code path, not the paper's results. They are far smaller than the paper's
# runs; where even the non-private DEFAULT ends at chance level, the runs are too short for any method to learn, and
# the findings below say so.

# %%
mnist.show_figures(
    plots.privacy_utility_figure,
    "Figure 5",
    look="Test loss, accuracy and the user-level $\\epsilon$ (log scale) against the round.",
)

# %% [markdown]
# The Scorecard's rows for {ref}`Figure 5 <paper-figure-5>`. A claim about the privacy-utility
# {ref}`Figures 4 <paper-figure-4>` to {ref}`7 <paper-figure-7>` is judged on the datasets stored at the largest
# profile; where MNIST has only this build's small runs, those claims rest on the other datasets (see `source`).

# %%
mnist.claims()

# %% [markdown]
# ## What to conclude
#
# MNIST's privacy-utility figure is the one this book cannot show at the paper's scale. After a fraction of the
# paper's training, only the comparisons between federations (iid against non-iid, 100 against 10000 users) carry
# over.
# The $\epsilon$ table needs no such care: it is what the paper-profile runs would report. The paper's claims on
# this figure, judged on its results alone:

# %%
display(Markdown(findings.conclusions("mnist", mnist.verdict_data)))

# %% [markdown]
# Run by run (folded): runs that end at a trivial level, lines whose seeds spread widely, runs shared between
# settings, and the run time.

# %% tags=["hide-output"]
mnist.conclusions(also=[short])
