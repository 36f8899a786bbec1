# %% [markdown]
# # The paper's numbered items
#
# Every section, definition, lemma, theorem, algorithm, equation, figure and table of the paper that this book
# discusses, in the paper's own numbering: its name as the paper gives it, what it says in a line, the `uldp` code
# that implements or computes it, and the chapters that treat it. The chapters link here wherever they name one of
# these items. The list is `uldp.paper.items.ITEMS`, and the tests check it against the paper's source: every
# number and name, every function named, and every chapter's links.

# %% tags=["parameters"]
profile = "default"

# %% tags=["remove-input"]
from IPython.display import Markdown

from uldp.paper.items import markdown

# %% [markdown]
# ## Sections

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("section"))

# %% [markdown]
# ## Definitions and the proposition

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("definition", "proposition"))

# %% [markdown]
# ## Lemmas

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("lemma"))

# %% [markdown]
# ## Theorems

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("theorem"))

# %% [markdown]
# ## Algorithms and the protocol

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("algorithm", "protocol"))

# %% [markdown]
# ## Equations

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("equation"))

# %% [markdown]
# ## Figures

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("figure"))

# %% [markdown]
# ## Tables

# %% tags=["remove-input"] mystnb={"markdown_format": "myst"}
Markdown(markdown("table"))
