"""The keys of a ``uldp deploy`` federation (``uldp deploy keys``): the silos' relay key and the SuperNodes' keys.

- ``relay.key``: the key the silos seal what they send each other through the server (the private set union's
  lists, ULDP-GROUP-k's user lists; :mod:`uldp.flower.pseudonyms`). One file, the same at every silo, never at the
  server: whoever makes it (one hospital, or the consortium's coordinator, not the server's operator) hands a copy
  to each hospital out of band, as it would a shared secret.
- ``supernode-<i>`` and ``supernode-<i>.pub``: one SuperNode authentication key pair per silo (ECDSA on NIST P-384,
  OpenSSH format, as ``ssh-keygen -t ecdsa -b 384`` writes it; Flower's ``--auth-supernode-private-key``). The silo
  keeps its private key; the server's operator gets the public keys, and the SuperLink admits only those SuperNodes
  (``uldp deploy server --supernode-key``, i.e. ``flower-superlink --enable-supernode-auth`` and ``flwr supernode
  register``).

Every key comes from the OS CSPRNG; private files are written with mode 0600 and never overwritten without
``force``.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from uldp.common.atomic import write_bytes_atomic
from uldp.common.checks import check_integer
from uldp.flower.pseudonyms import new_silo_key

#: The relay key's file name.
RELAY_KEY_FILE = "relay.key"
#: Most silos ``write_keys`` makes keys for.
MAX_SILOS = 10_000


def supernode_key_pair() -> tuple[bytes, bytes]:
    """A fresh SuperNode key pair: (OpenSSH private key, OpenSSH public key line)."""
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public + b"\n"


def write_keys(directory: str | Path, *, n_silos: int, force: bool = False) -> list[Path]:
    """Write ``relay.key`` and ``supernode-<i>`` / ``supernode-<i>.pub`` for silos ``0 .. n_silos - 1``.

    Returns:
        The written paths, the relay key first.

    Raises:
        ValueError: ``n_silos`` not in 1..:data:`MAX_SILOS`, or a key file exists and ``force`` is false.
    """
    check_integer("--silos", n_silos, maximum=MAX_SILOS)
    directory = Path(directory)
    relay = directory / RELAY_KEY_FILE
    nodes = [directory / f"supernode-{s}" for s in range(n_silos)]
    paths = [relay, *(p for node in nodes for p in (node, node.with_name(node.name + ".pub")))]
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        raise ValueError(
            f"{existing[0]} exists ({len(existing)} key file(s) in {directory}): pass --force to replace "
            f"them (every silo then needs its new files), or choose another --out"
        )
    write_bytes_atomic(relay, new_silo_key().hex().encode() + b"\n", private=True)
    for node in nodes:
        private, public = supernode_key_pair()
        write_bytes_atomic(node, private, private=True)
        write_bytes_atomic(node.with_name(node.name + ".pub"), public)
    return paths
