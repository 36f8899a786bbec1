# %% [markdown]
# # Bibliography
#
# The paper this book reproduces, {cite:t}`kato2024uldpfl`, and the works the chapters cite. The entries live in
# `references.bib` at the repository's root; a chapter cites one with ``{cite}`key` ``.
#
# ```{bibliography}
# :all:
# ```

# %% tags=["parameters"]
profile = "default"
