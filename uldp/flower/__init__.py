"""Flower-native pieces for flwr's Message API: :class:`UldpStrategy` (ServerApp side) and
:func:`silo_client_app` (ClientApp side) for ULDP-AVG and ULDP-AVG-w with user sampling (Algorithms 3-4).

Each silo loads only its own records and patient ids from its own files; users are matched across silos by keyed
pseudonyms (:mod:`uldp.flower.pseudonyms`: HMAC-SHA256 under a key the silos share and the server never sees).

What this does not do: Protocol 1 (the paper's private weighting). Here the per-user counts ``n_su`` that the
enhanced weights need are sealed for the other silos and relayed by the server, which cannot read them, but the
other silos can. Use ``uldp deploy`` with ``secure=True`` when ``n_su`` must stay hidden from the other silos too.
"""

from uldp.flower.app import SiloData, UldpStrategy, silo_client_app
from uldp.flower.local import LocalGrid
from uldp.flower.pseudonyms import new_silo_key, pseudonymize, read_key_file, write_key_file

__all__ = ["LocalGrid", "SiloData", "UldpStrategy", "new_silo_key", "pseudonymize", "read_key_file", "silo_client_app",
           "write_key_file"]
