# %% [markdown]
# # Bibliography
#
# The paper this book reproduces, {cite:t}`kato2024uldpfl`, and the works the chapters cite. The paper's privacy tools come
# from these works: Renyi DP, its composition, its Gaussian mechanism and its group privacy
# ({ref}`Lemma 1 <paper-lemma-1>`, {ref}`Lemma 3 <paper-lemma-3>` and {ref}`Lemma 6 <paper-lemma-6>`) from
# {cite:t}`mironov2017renyi`, the conversion to $(\epsilon, \delta)$-DP ({ref}`Lemma 2 <paper-lemma-2>`) from
# {cite:t}`balle2020hypothesis`, and the sub-sampled Gaussian's bound ({ref}`Lemma 4 <paper-lemma-4>`), as computed
# here, from {cite:t}`mironov2019sampled`. The page {doc}`paper_items` lists every numbered item of the paper.
#
# ```{bibliography}
# :all:
# ```

# %% tags=["parameters"]
profile = "default"
