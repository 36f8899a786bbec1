"""The reproduction of the paper: what the book and the experiment grids use, and the library never imports.

The library (every other package of :mod:`uldp`) is what a silo's engineer imports. This package holds the
machinery of the executable book on top of it:

- :mod:`uldp.paper.settings`: the figures' settings of the paper's ``settings.md`` (the per-dataset defaults are the
  library's, :mod:`uldp.defaults`); :mod:`uldp.paper.items`: the paper's numbered items; :mod:`uldp.paper.errata`.
- :mod:`uldp.paper.experiments` and its command ``uldp grid`` (:mod:`uldp.paper.experiments_cli`): the paper's
  figures as resumable grids of stored runs.
- :mod:`uldp.paper.scorecard`, :mod:`uldp.paper.verdicts`, :mod:`uldp.paper.scorecard_runtime`: the paper's claims
  judged on those results.
- :mod:`uldp.paper.chapters`, :mod:`uldp.paper.plots`, :mod:`uldp.paper.beyond`: what the chapters show.

``tests/test_layers.py`` checks that no library module imports this package.
"""
