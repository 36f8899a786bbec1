"""``uldp roster``: a silo's identity and the federation roster it holds (:mod:`uldp.secure.roster`).

- ``uldp roster identity --name NAME --out FILE``: the silo's operator makes its identity (mode 0600) and sends the
  printed fingerprint to every other silo out of band (``--force`` rotates it).
- ``uldp roster add --roster FILE --name NAME --fingerprint HEX``: each silo adds every silo (itself included), in
  the federation's order, from the fingerprints it received out of band (``--replace`` takes a rotated one).
- ``uldp roster show --roster FILE``: the silos, their fingerprints and the roster's digest, to compare between
  silos by voice or on paper: silos whose digests differ never complete a set-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from uldp.cli import print_json

if TYPE_CHECKING:
    import argparse

    from uldp.secure.roster import Roster


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``roster`` with its ``identity``, ``add`` and ``show`` sub-commands."""
    roster = subparsers.add_parser(
        "roster",
        help="a silo's identity key and the federation roster (keys the server cannot swap)",
    )
    commands = roster.add_subparsers(dest="roster_command", required=True, metavar="ACTION")

    identity = commands.add_parser(
        "identity", help="make this silo's identity (Ed25519, mode 0600)"
    )
    identity.add_argument("--name", required=True, help="this silo's name in the roster")
    identity.add_argument("--out", type=Path, required=True, help="the identity file to write")
    identity.add_argument(
        "--force", action="store_true", help="replace an existing identity (rotation)"
    )
    identity.set_defaults(handler=run_identity)

    add = commands.add_parser("add", help="add a silo (or replace its fingerprint) in a roster")
    add.add_argument("--roster", type=Path, required=True, help="the roster file (made if missing)")
    add.add_argument("--name", required=True, help="the silo's name")
    add.add_argument("--fingerprint", required=True, help="its identity's fingerprint (64 hex)")
    add.add_argument(
        "--replace", action="store_true", help="replace the silo's fingerprint (a rotated identity)"
    )
    add.set_defaults(handler=run_add)

    show = commands.add_parser("show", help="list a roster's silos, fingerprints and digest")
    show.add_argument("--roster", type=Path, required=True, help="the roster file")
    show.set_defaults(handler=run_show)
    for command in (identity, add, show):
        command.add_argument("--json", action="store_true", help="print one JSON document")


def run_identity(args: argparse.Namespace) -> int:
    """Write a new identity; print its fingerprint (``--json``: ``name``, ``fingerprint``, ``path``)."""
    from uldp.secure.roster import write_identity

    identity = write_identity(args.out, args.name, force=args.force)
    if args.json:
        print_json({"name": identity.name, "fingerprint": identity.fingerprint}, args)
    else:
        print(f"{identity.name} {identity.fingerprint}")
    return 0


def run_add(args: argparse.Namespace) -> int:
    """Add or replace one silo; print the roster (as :func:`run_show`)."""
    from uldp.secure.roster import Roster, RosterEntry, read_roster, write_roster

    if args.roster.exists():
        roster = read_roster(args.roster).with_entry(
            args.name, args.fingerprint, replace=args.replace
        )
    elif args.replace:
        raise ValueError(
            f"roster {args.roster} does not exist; add {args.name!r} without --replace"
        )
    else:
        roster = Roster((RosterEntry(args.name, args.fingerprint),))
    write_roster(args.roster, roster)
    return _print_roster(roster, args)


def run_show(args: argparse.Namespace) -> int:
    """Print the roster's silos in order with their fingerprints, and its digest."""
    from uldp.secure.roster import read_roster

    return _print_roster(read_roster(args.roster), args)


def _print_roster(roster: Roster, args: argparse.Namespace) -> int:
    silos = [
        {"silo": s, "name": e.name, "fingerprint": e.fingerprint}
        for s, e in enumerate(roster.silos)
    ]
    if args.json:
        print_json({"silos": silos, "digest": roster.digest.hex()}, args)
    else:
        for row in silos:
            print(f"{row['silo']:>4} {row['name']:<24} {row['fingerprint']}")
        print(f"digest {roster.digest.hex()}")
    return 0
