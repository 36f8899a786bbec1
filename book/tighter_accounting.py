# %% [markdown]
# # Tighter accounting: PLD beside RDP
#
# Every epsilon of the paper comes from Rényi DP (RDP): the privacy loss is bounded through its moments, and the moments
# are converted to $(\epsilon, \delta)$ by the paper's {ref}`Lemma 2 <paper-lemma-2>`. The conversion loses some slack.
# A *privacy-loss distribution* (PLD) accountant keeps the whole distribution of the privacy loss, discretised
# pessimistically, and reads $\epsilon$ off it: an upper bound within the discretisation step of the exact value
# (`uldp.accounting.pld`, built on dp-accounting's PLD).
#
# For ULDP-GROUP-$k$ the gain is of another kind. The paper certifies a user through *group privacy* of the record-level
# guarantee ({ref}`Lemma 6 <paper-lemma-6>` or {ref}`Lemma 5 <paper-lemma-5>`, see the group-privacy chapter). A group
# of $k$ records under Poisson sampling at rate $q$ is itself a mechanism that can be accounted directly: the number of
# the group's records in a batch is $J \sim \mathrm{Binomial}(k, q)$, and one DP-SGD step is the mixture of Gaussians
# $\sum_j P(J = j)\, \mathcal{N}(j, \sigma^2)$ against $\mathcal{N}(0, \sigma^2)$ ({cite:t}`ganesh2024tight`). Its PLD needs no
# group-privacy conversion at all.
#
# The accountant is chosen by name everywhere: `accountant="rdp"` (the paper's, the default) or `"pld"` in
# `uldp.accounting.epsilon_for_method` and `sigma_for_epsilon`, in `RunConfig`, and as `--accountant` on
# `uldp epsilon`, `uldp run` and `uldp grid`.

# %% tags=["parameters"]
profile = "default"

# %%
import time
import warnings

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from uldp.accounting import (
    epsilon_for_method,
    group_privacy_table,
    mixture_group_curve,
    sigma_for_epsilon,
)
from uldp.paper.beyond import group_epsilons, user_level_epsilons
from uldp.paper.chapters import show_captioned
from uldp.paper.plots import group_privacy_figure

warnings.simplefilter(
    "ignore", RuntimeWarning
)  # RDP grid-edge notes at extreme settings; the values stand
SMOKE = profile == "smoke"
started = time.perf_counter()

# %% [markdown]
# ## Every paper setting: RDP beside PLD
#
# The user-level methods' guarantee depends only on $\sigma$, $T$, $q$ and $\delta$ ({ref}`Theorem 1 <paper-theorem-1>`
# and {ref}`Theorem 3 <paper-theorem-3>`; ULDP-NAIVE is a Gaussian of multiplier $\sigma$ per round like ULDP-SGD/AVG
# without sampling). Every distinct setting of the paper's grids, read from `uldp.paper.experiments`:

# %%
user_level = user_level_epsilons()
user_level.round(3)

# %%
Markdown(
    f"PLD is below RDP in every setting, by {1 - user_level['PLD / RDP'].max():.0%} to "
    f"{1 - user_level['PLD / RDP'].min():.0%} (the column PLD / RDP): the slack of the RDP-to-$(\\epsilon, "
    "\\delta)$ conversion. The same runs, trained once, satisfy the smaller epsilon: the accountant changes "
    "nothing about the training."
)

# %% [markdown]
# ULDP-GROUP-$k$'s guarantee depends on the silos' sizes after its records are filtered (each silo's DP-SGD runs at rate
# $B / n_s$ for $Q n_s / B$ steps a round), so it is accounted on the prepared federations of the paper's runs, without
# training them (`accounted_results(..., accountant="pld")` re-accounts the stored paper runs). The RDP column is what
# those runs report. Like {ref}`Theorem 2 <paper-theorem-2>`, the mixture accountant takes the silo that costs most:
# that covers a group whose records lie in one silo, and every placement of the group when the silos share their rate
# and steps (a split is a vector of smaller norm, dominated by the aligned mixture); for silos of different sizes no
# proof for split groups is given here (`uldp.accounting.pld`).

# %%
group_grids = (
    {"heart_disease": ("ULDP-GROUP-8",)}
    if SMOKE
    else {
        "heart_disease": ("ULDP-GROUP-2", "ULDP-GROUP-8", "ULDP-GROUP-median"),
        "tcga_brca": ("ULDP-GROUP-2", "ULDP-GROUP-8", "ULDP-GROUP-median"),
    }
)
group_table = group_epsilons(group_grids)
group_table.round(2)

# %%
factors = (1 / group_table.groupby("method")["PLD / RDP"].agg(["max", "min"])).round(3)
factors.columns = ["RDP / PLD, smallest", "RDP / PLD, largest"]
display(factors)
Markdown(
    "The mixture accountant divides ULDP-GROUP-$k$'s epsilon by a factor that grows with the group (the table "
    f"above, at the {profile} profile); its epsilons still range from {group_table['epsilon PLD (mixture)'].min():,.0f} to "
    f"{group_table['epsilon PLD (mixture)'].max():,.0f}: the paper's conclusion that ULDP-GROUP-$k$ gives no useful "
    "user-level guarantee stands."
)

# %% [markdown]
# HeartDisease and TcgaBrca are shown; Creditcard and MNIST need their large datasets loaded, and the same call
# accounts them: `accounted_results("creditcard", methods=..., accountant="pld")`.
#
# ## The group-privacy curve, recomputed
#
# The group-privacy chapter's run: $\sigma = 5$, record rate $q = 0.01$, $10^5$ steps, $\delta = 10^{-5}$. Beside its
# two routes, RDP group privacy (valid orders) and $(\epsilon, \delta)$ group privacy ({ref}`Lemma 5 <paper-lemma-5>`,
# exact solve), the mixture accountant:

# %%
SIGMA, SAMPLE_RATE, ITERATIONS, DELTA = 5.0, 0.01, 100_000, 1e-5
GROUP_SIZES = [1, 2, 8, 64] if SMOKE else [1, 2, 4, 8, 16, 32, 64]
curve = pd.DataFrame(
    group_privacy_table(sigma=SIGMA, q=SAMPLE_RATE, steps=ITERATIONS, delta=DELTA, ks=GROUP_SIZES)
).set_index("k")
mixture = pd.DataFrame(
    mixture_group_curve(sigma=SIGMA, q=SAMPLE_RATE, steps=ITERATIONS, delta=DELTA, ks=GROUP_SIZES)
).set_index("k")
curve = curve[["epsilon_rdp", "epsilon_dp"]].join(mixture)
curve["best route / mixture"] = (
    curve[["epsilon_rdp", "epsilon_dp"]].min(axis=1) / curve["epsilon_mixture"]
)
curve.round(2)

# %%
group_privacy_figure(
    curve,
    [
        ("epsilon_rdp", "o-", "RDP group privacy (valid orders)"),
        ("epsilon_dp", "s-", "$(\\epsilon, \\delta)$ group privacy (Lemma 5)"),
        ("epsilon_mixture", "^-", "mixture of Gaussians (PLD, no conversion)"),
    ],
    title="Group privacy ($\\sigma=5$, $q=0.01$, $10^5$ steps)",
)
show_captioned(
    plt.gcf(),
    "Group privacy of DP-SGD three ways, $\\epsilon$ against the group size $k$ (log-log): "
    "compare the mixture accountant (triangles) with the two conversions at each $k$.",
)

# %%
k64 = curve.loc[64]
print(
    f"k = 64: RDP route {k64['epsilon_rdp']:.0f}, (eps, delta) route {k64['epsilon_dp']:.0f}, "
    f"mixture {k64['epsilon_mixture']:.0f}"
)

# %%
Markdown(
    "The better of the two routes over the mixture accountant: "
    + "; ".join(
        f"{curve.loc[k, 'best route / mixture']:.2f} times at $k = {k}$"
        for k in GROUP_SIZES
        if k > 1
    )
    + ". At $k = 1$ all three agree up to the RDP conversion's slack: there is no group."
)

# %% [markdown]
# Why not far below for small $k$? With $q = 0.01$ a group of two rarely has both records in one batch
# (probability $10^{-4}$ a step): the pair behaves almost like one record sampled at rate $2q$, and the
# $(\epsilon, \delta)$ route, which pays $k \epsilon$ and a factor on $\delta$, is then only moderately loose.
# The conversions' looseness compounds with $k$ (the RDP route's $3^{\log_2 k}$ factor, the $(\epsilon, \delta)$
# route's $e^{(k-1)\epsilon}$), which is why the gap widens.
#
# And even the mixture accountant is far from a useful guarantee at $k = 64$; that is not a weakness of the
# accountant, which is exact up to its discretisation. A group of 64 records sampled at rate $q = 0.01$ has on average
# $64 q = 0.64$ of its records in each of $10^5$ batches; each one moves the batch's sum by up to the clip norm, against noise of
# $\sigma = 5$ times that norm. What grows with $k$ is the mechanism's true privacy loss, not only the looseness of
# the conversions. Group privacy at record level stays hopeless for users with many records: this is what ULDP-AVG
# avoids by bounding the user's whole contribution at $C$.
#
# ## The noise each accountant needs
#
# Choosing $\sigma$ for a budget (`sigma_for_epsilon(..., accountant=...)`, `uldp epsilon --epsilon`,
# `RunConfig(epsilon=...)`): the smallest $\sigma$ that reaches $\epsilon$ at $\delta = 10^{-5}$, for
# ULDP-AVG on HeartDisease ($T = 50$, no sampling) and for a second example, ULDP-AVG-w with $T = 30$ rounds and
# user sampling at $q = 0.5$.

# %%
TARGETS = [1, 2, 4, 8]
budget_settings = {
    "HeartDisease ULDP-AVG (T=50, q=1)": {"rounds": 50, "q": 1.0},
    "ULDP-AVG-w (T=30, q=0.5)": {"rounds": 30, "q": 0.5},
}
sigma_rows = []
for name, arguments in budget_settings.items():
    for target in (
        [2] if SMOKE and arguments["q"] < 1 else TARGETS
    ):  # RDP at q < 1 costs seconds per sigma
        by = {
            acc: sigma_for_epsilon(
                "ULDP-AVG-w", epsilon=target, delta=1e-5, accountant=acc, **arguments
            )
            for acc in ("rdp", "pld")
        }
        sigma_rows.append(
            {
                "setting": name,
                "target epsilon": target,
                "sigma RDP": by["rdp"],
                "sigma PLD": by["pld"],
                "noise saved": 1 - by["pld"] / by["rdp"],
            }
        )
sigmas = pd.DataFrame(sigma_rows)
sigmas.round(3)

# %%
rdp_sigma = sigma_for_epsilon("ULDP-AVG-w", epsilon=2.0, rounds=30, delta=1e-5, q=0.5)
example_pld = epsilon_for_method(
    "ULDP-AVG-w", sigma=rdp_sigma, rounds=30, delta=1e-5, q=0.5, accountant="pld"
).epsilon
pld_sigma = sigma_for_epsilon(
    "ULDP-AVG-w", epsilon=2.0, rounds=30, delta=1e-5, q=0.5, accountant="pld"
)
Markdown(
    f"PLD needs {sigmas['noise saved'].min():.0%} to {sigmas['noise saved'].max():.0%} less noise for the same "
    f"guarantee in these settings. In the second example (ULDP-AVG-w, $T = 30$, $q = 0.5$) RDP's "
    f"$\\sigma = {rdp_sigma:.2f}$ for $\\epsilon = 2$ gives $\\epsilon = {example_pld:.2f}$ by PLD, and PLD reaches "
    f"$\\epsilon = 2$ at $\\sigma = {pld_sigma:.2f}$ (opacus' PRV accountant, an independent implementation, "
    "agrees within 1%: `tests/test_accounting_pld.py`)."
)

# %% [markdown]
# ## Utility at equal epsilon
#
# Whether that noise reduction buys measurable utility is a question for training runs at equal epsilon: the paper's
# ULDP-AVG-w runs (σ = 5, epsilon by RDP) beside runs of the same settings trained to the same epsilon with PLD's
# smaller σ, everything else the paper's (`uldp grid NAME --profile paper --methods ULDP-AVG-w --accountant pld
# --epsilon EPS`). They are read as stored, whatever this page's profile.

# %%
from uldp.paper.beyond import PLD_RERUNS, pld_claim, pld_equal_epsilon
from uldp.paper.verdicts import NotMeasured

compared = []
for grid, target in PLD_RERUNS:
    try:
        table = pld_equal_epsilon(grid, epsilon=target)
    except NotMeasured as reason:
        display(Markdown(f"**{grid}**: not measured ({reason})."))
        continue
    compared.append(table)
    display(
        Markdown(f"**{grid}**, epsilon {target:g} at delta 1e-5:"),
        table[
            ["sigma_rdp", "sigma_pld", "utility_rdp", "std_rdp", "utility_pld", "std_pld", "gain"]
        ].round(4),
    )
claim = pld_claim()
within = [bool((t["gain"].abs() <= t[["std_rdp", "std_pld"]].max(axis=1)).all()) for t in compared]
Markdown(
    f"Verdict (the Scorecard's row *beyond the paper*): **{claim['verdict']}**. {claim['measured']}. "
    + (
        "Every gain is within one standard deviation over seeds: here the tighter accountant buys a guarantee "
        "stated more exactly rather than a measurably better model."
        if compared and all(within)
        else ""
    )
)

# %%
assert user_level["PLD / RDP"].between(0.9, 0.95).all() and (group_table["PLD / RDP"] < 0.7).all()
assert (curve.loc[[k for k in GROUP_SIZES if k > 1], "best route / mixture"] > 1).all()
assert abs(example_pld - 1.83) < 0.01
print(f"chapter computed in {time.perf_counter() - started:.0f} s")
