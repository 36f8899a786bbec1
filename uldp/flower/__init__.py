"""Flower-native pieces for flwr's Message API: :class:`UldpStrategy` (ServerApp side) and
:func:`silo_client_app` (ClientApp side; :mod:`uldp.flower.strategy`, :mod:`uldp.flower.client`) for every method
of :mod:`uldp.methods` (ULDP-GROUP-k's flags by :mod:`uldp.flower.group`; DEFAULT only where each silo's own node
config allows a release without noise), each round driven through :mod:`uldp.federation`.

Each silo loads only its own records and patient ids from its own files; the silos agree on the users by a
private set union with commutative Diffie-Hellman blinding (:mod:`uldp.flower.psu`, :mod:`uldp.secure.psu`), its
lists sealed under a relay key the silos share and the server never sees (:mod:`uldp.flower.pseudonyms`).

The per-user counts ``n_su`` that the enhanced weights of ULDP-AVG-w need: by default they are sealed for the other
silos and relayed by the server, which cannot read them, but the other silos can. With
``UldpStrategy(secure=True)`` the weights are computed by Protocol 1 (:mod:`uldp.flower.secure`): no party learns
another silo's ``n_su`` or any ``N_u``; each silo keeps its protocol secrets between messages in its node-local
context state as bytes (no pickle), and the aggregate is within the protocol's precision P of the plain one. What
the silos still learn from the union is |U|, each other silo's number of patients and which of their own patients
the others also hold (:mod:`uldp.secure.psu` says exactly what, and why), never a patient they do not hold.
``uldp deploy`` runs this same strategy and ClientApp (:mod:`uldp.deploy.app`) from a settings file.

Flower is an optional dependency: ``pip install 'uldp[deploy]'``. The names below are imported when first used, so
that ``uldp --help`` (which registers :mod:`uldp.flower.cli`, the package's command line) stays light.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uldp.flower.client import SiloData, silo_client_app, user_numbers
    from uldp.flower.local import LocalGrid
    from uldp.flower.pseudonyms import new_silo_key, read_key_file, write_key_file
    from uldp.flower.strategy import UldpStrategy
    from uldp.flower.table import Table

__all__ = [
    "LocalGrid",
    "SiloData",
    "Table",
    "UldpStrategy",
    "new_silo_key",
    "read_key_file",
    "silo_client_app",
    "user_numbers",
    "write_key_file",
]

_LAZY = {
    "LocalGrid": "local",
    "SiloData": "client",
    "Table": "table",
    "UldpStrategy": "strategy",
    "new_silo_key": "pseudonyms",
    "read_key_file": "pseudonyms",
    "silo_client_app": "client",
    "user_numbers": "client",
    "write_key_file": "pseudonyms",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'uldp.flower' has no attribute {name!r}")
    try:
        import flwr  # noqa: F401 - only to say what to install when it is missing
    except ModuleNotFoundError as error:
        if error.name != "flwr":
            raise
        raise ModuleNotFoundError(
            "uldp.flower needs Flower (flwr 1.41), an optional dependency of uldp: "
            "pip install 'uldp[deploy]' (or 'uldp[all]')",
            name="flwr",
        ) from error
    return getattr(import_module(f"uldp.flower.{_LAZY[name]}"), name)
