"""uldp: user-level differential privacy for cross-silo federated learning.

A library and an executable book that reproduce, check and extend Kato et al., "ULDP-FL: Federated Learning
with Across-Silo User-Level Differential Privacy" (VLDB). Sub-packages:

- :mod:`uldp.accounting`: RDP and (epsilon, delta) guarantees of every method, group privacy (errata fixed).
- :mod:`uldp.data`: the datasets and the allocation of records to users and silos.
- :mod:`uldp.models`: the paper's models, losses and metrics.
- :mod:`uldp.methods`, :mod:`uldp.training`, :mod:`uldp.simulation`: the federated algorithms.
- :mod:`uldp.secure`: the private weighting protocol (Protocol 1).
"""

__version__ = "0.1.0"
