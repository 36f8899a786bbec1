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
# # Users across silos
#
# The paper's threat model is *cross-silo* federated learning in which one **user** (a patient, a card holder)
# can have records in several **silos** (hospitals, banks). User-level DP must protect all of a user's records at
# once, wherever they sit. How many records a user has, and how they spread over silos, decides how much a
# record-level guarantee has to be inflated (group privacy) and how well the user-level methods work
# (ULDP-AVG's per-user clipping, ULDP-AVG-w's weights $n_{s,u} / N_u$).
#
# The paper does not ship user identities with its datasets: it *allocates* records to users and silos with a uniform or
# a Zipf distribution ({ref}`Section 5.1 <paper-section-5-1>`). This chapter shows the datasets, the allocations that
# `uldp.data.allocation` produces, and the models of `uldp.models`. The details the paper leaves open ({doc}`settings`,
# "Allocation details") are in the module's docstring; in short:
#
# - **uniform**: each record's user and silo are uniformly random (balanced: every user gets $\lfloor n/|U|\rfloor$
#   or $\lceil n/|U|\rceil$ records).
# - **zipf**: records per user follow a bounded Zipf law with $\alpha = 0.5$ over user ranks; each user spreads its
#   records over its own random ranking of the silos with a Zipf law with $\alpha = 2$.
# - **medical** datasets (HeartDisease, TcgaBrca) keep FLamby's silo of each record. Their *zipf* scheme gives each
#   user a primary silo that receives about 80% of its records. For TcgaBrca, whose Cox loss needs at least two
#   records of a user in a silo, records are handed out in pairs, so every (user, silo) pair with records has at
#   least two **by construction**.

# %% tags=["parameters"]
profile = "default"

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from uldp.data import DATASETS, allocate, load
from uldp.data.allocation import labels_per_user, summary
from uldp.models import build_model, count_parameters
from uldp.paper.chapters import show_captioned
from uldp.paper.plots import FIGURE_WIDTH, figure_legend

SEED = 0
# (dataset, number of users): Creditcard with 100 users, the medical datasets with the paper's smaller user count.
CASES = [("creditcard", 100), ("heart_disease", 50), ("tcga_brca", 50)]
EXTRA_CASES = (
    [] if profile == "smoke" else [("creditcard", 1000), ("heart_disease", 200), ("tcga_brca", 200)]
)
SCHEMES = ["uniform", "zipf"]

datasets = {name: load(name) for name in sorted({name for name, _ in CASES + EXTRA_CASES})}

# %% [markdown]
# ## Users, silos and the server
#
# The picture the rest of the book assumes: a user's records sit in several silos; the silos train and add the noise,
# and a server sums what they send. The private weighting protocol's messages (the second panel) are what ULDP-AVG-w adds so
# that the weights $n_{su}/N_u$ can be used while no party learns another's counts ({doc}`weighting_protocol`).

# %%
from uldp.paper.chapters import glossary, protocol_diagram

show_captioned(
    protocol_diagram(),
    "Left: four users whose records sit in one to three silos. Right: the messages of "
    "{ref}`Protocol 1 <paper-protocol-1>` between the silos and the server, set-up once, then two each round; a "
    "square is a step one side computes alone (silo 0's seed goes to the other silos sealed, through the server).",
)

# %% [markdown]
# (glossary)=
# ## The symbols
#
# The symbols of the paper and of every chapter, with where the paper defines them:

# %%
glossary()

# %% [markdown]
# ## The datasets
#
# Training and test sizes, the silos, and the model each dataset is trained with. HeartDisease and TcgaBrca come
# with FLamby's fixed centres and train/test split; Creditcard is split 85/15 (stratified) and its records are
# allocated to 5 silos. The offline copy of Creditcard is a 5,412-row subset (all 492 frauds and 4,920 random
# normal rows) that stands in for the paper's undersampled training set; the *variant* column says which
# preparation ran.

# %%
pd.DataFrame(
    [
        {
            "dataset": name,
            "train records": data.n_train,
            "test records": int(data.x_test.shape[0]),
            "silos": data.n_fixed_silos or DATASETS[name].default_silos,
            "train records per silo": (
                np.bincount(data.train_silo).tolist()
                if data.train_silo is not None
                else "allocated"
            ),
            "model parameters": count_parameters(build_model(name)),
            "variant": data.variant,
        }
        for name, data in datasets.items()
    ]
).style.hide(
    axis="index"
)  # a Styler shows each cell whole (a DataFrame's HTML cuts text at 50 characters)

# %% [markdown]
# ## Allocations
#
# Each bar is one user (sorted by its number of records) and its colours are the silos holding its records.
# Under *uniform*, every user has about the same number of records, spread over all silos; under *zipf*, a few
# users own many records and most of a user's records sit in one silo.

# %%
allocations = {
    (name, n_users, scheme): allocate(
        datasets[name],
        n_users=n_users,
        n_silos=DATASETS[name].default_silos,
        scheme=scheme,
        seed=SEED,
    )
    for name, n_users in CASES + EXTRA_CASES
    for scheme in SCHEMES
}

fig, axes = plt.subplots(
    len(CASES), len(SCHEMES), figsize=(FIGURE_WIDTH, 2.8 * len(CASES) + 0.8), squeeze=False
)
for row, (name, n_users) in enumerate(CASES):
    for column, scheme in enumerate(SCHEMES):
        counts = allocations[(name, n_users, scheme)].counts  # [silo, user]
        order = np.argsort(-counts.sum(axis=0), kind="stable")
        ax = axes[row, column]
        bottom = np.zeros(n_users)
        for silo, per_user in enumerate(counts[:, order]):
            ax.bar(
                np.arange(n_users),
                per_user,
                bottom=bottom,
                width=1.0,
                label=f"silo {silo}",
                color=f"C{silo}",
            )
            bottom += per_user
        ax.set_title(f"{name}, {n_users} users, {scheme}")
        ax.set_xlabel("user (sorted by records)")
        ax.set_ylabel("records")
figure_legend(fig, axes, title=False)
show_captioned(
    fig,
    "Records per user, stacked by silo, users sorted by their records: compare the flat uniform "
    "allocations with the zipf ones, where a few users hold most records, each mostly in one silo.",
)

# %% [markdown]
# ## Records per user and the top silo's share
#
# For each allocation: the minimum, median and maximum number of records per user, the mean (over users) share of
# a user's records held by its top silo, and the smallest non-zero $n_{s,u}$. The TcgaBrca rows show the Cox
# requirement $n_{s,u} \ge 2$ holding for both schemes; the medical *zipf* rows show the primary silo's share near
# 80% (higher than 0.8 on average, because users with one or two records trivially have all of them in one silo).

# %%
rows = []
for (name, n_users, scheme), allocation in allocations.items():
    stats = summary(allocation)
    rows.append(
        {
            "dataset": name,
            "users": n_users,
            "scheme": scheme,
            "min": stats["records_per_user_min"],
            "median": stats["records_per_user_median"],
            "max": stats["records_per_user_max"],
            "users without records": stats["users_without_records"],
            "top-silo share": round(stats["top_silo_share_mean"], 3),
            "smallest n_su > 0": stats["min_records_per_user_silo_pair"],
        }
    )
table = pd.DataFrame(rows).set_index(["dataset", "users", "scheme"])
table

# %%
tcga_rows = table.loc["tcga_brca"]
assert (tcga_rows["smallest n_su > 0"] >= 2).all(), (
    "every TcgaBrca (user, silo) pair must hold >= 2 records"
)

# %% [markdown]
# ## Non-iid labels (MNIST)
#
# The MNIST experiments also use *zipf-noniid*: the Zipf sizes, but each user holds at most two digits. The
# records of a digit are shared among the users holding it in proportion to their Zipf targets, so sizes stay
# skewed while labels become concentrated. (Skipped at the smoke profile: loading MNIST takes a few seconds.)

# %%
if profile != "smoke":
    mnist = load("mnist")
    noniid = allocate(mnist, n_users=100, n_silos=5, scheme="zipf-noniid", n_labels=2, seed=SEED)
    iid = allocate(mnist, n_users=100, n_silos=5, scheme="zipf", seed=SEED)
    display_frame = (
        pd.DataFrame(
            {
                scheme: pd.Series(labels_per_user(allocation, mnist.labels))
                .value_counts()
                .sort_index()
                for scheme, allocation in (("zipf", iid), ("zipf-noniid", noniid))
            }
        )
        .fillna(0)
        .astype(int)
    )
    display_frame.index.name = "labels held by a user"
    display(display_frame)

# %% [markdown]
# ## What this means for the methods
#
# With *zipf*, the largest users own tens of times more records than the median user. Record-level DP with group
# privacy must then take the group size $k$ from the largest users (ULDP-GROUP-max) or drop records beyond $k$,
# while ULDP-AVG bounds each user's total contribution by clipping per user. The weights $n_{s,u}/N_u$ of
# ULDP-AVG-w follow the top-silo shares above: a user whose records all sit in one silo gives that silo its full
# budget.
