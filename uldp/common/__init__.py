"""Foundations that every other part of :mod:`uldp` stands on and that know nothing of federated learning.

- :mod:`uldp.common.checks`: input validation with one wording (counts, rates, numbers, delta).
- :mod:`uldp.common.atomic`: atomic file writes and the clean-up of their leftovers.
- :mod:`uldp.common.persist`: the byte formats of arrays, checkpoints and configuration fingerprints.
- :mod:`uldp.common.provenance`: what produced a result (command, commit, packages, machine).
- :mod:`uldp.common.threads`: torch's thread count, set for a block and restored.
- :mod:`uldp.common.logs`: imports that leave the root logger as it was.
- :mod:`uldp.common.extras`: which ``pip install 'uldp[...]'`` extra installs an optional package.
"""
