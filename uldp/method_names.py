"""The names of the method registry and their one parser (no torch: the accountant and the CLI read it too).

A registry name is ``"DEFAULT"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (``k`` a positive integer, ``max`` or
``median``), ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"`` or ``"ULDP-AVG-w"`` (Algorithms 1-4 of the paper).
:func:`parse_method` turns one into a :class:`MethodSpec`; :mod:`uldp.methods` builds the method of a spec's
family and :mod:`uldp.accounting` chooses the theorem of its guarantee from the same family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Secure aggregation by Protocol 1 (Section 4): the server decrypts only ``sum_s sum_u w_su Delta_su + z_s`` and
#: the enhanced weights ``w_su = n_su / N_u`` are computed without any party learning another silo's ``n_su``.
PROTOCOL_1 = "protocol-1"
#: Secure aggregation by Protocol 1's pairwise masks alone (:mod:`uldp.secure.masked_sum`): each silo's update
#: leaves masked and only the sum of the silos' updates is decoded.
MASKED_SUM = "masked-sum"


@dataclass(frozen=True)
class Capabilities:
    """What the methods of one family need from a federation (read by the transports, the accountant, ``fit``).

    Attributes:
        private: Whether the method has a user-level DP guarantee (all but DEFAULT).
        per_user: Whether it clips per user and silo and samples users (ULDP-SGD/AVG, Algorithms 3-4).
        reads_users: Whether training reads who owns each record (a user-blind method -- DEFAULT, ULDP-NAIVE --
            uses every record of a silo alike, so with fixed silos its run does not depend on the allocation).
        clipped: What it clips, as a message names it: ``"<per-silo|per-record|per-user> <update|gradient>"``
            (``""``: nothing); ``uldp.fit``'s clipping advice measures the norms of exactly that.
        group_privacy: Whether its guarantee is record-level DP-SGD in each silo lifted to users by group privacy
            (ULDP-GROUP, Theorem 2) rather than the Gaussian mechanism on the silos' noisy sum (Theorems 1, 3).
    """

    private: bool
    per_user: bool
    reads_users: bool
    clipped: str
    group_privacy: bool = False


#: Each family's capabilities; its keys are the families (``ULDP-SGD`` and ``ULDP-AVG`` include their ``-w``
#: variants). A built-in family is one entry here (and its names in :func:`parse_method`); a family of your own is
#: added by :func:`register_family` (through :func:`uldp.methods.register_method`).
FAMILY_CAPABILITIES: dict[str, Capabilities] = {
    "DEFAULT": Capabilities(private=False, per_user=False, reads_users=False, clipped=""),
    "ULDP-NAIVE": Capabilities(
        private=True, per_user=False, reads_users=False, clipped="per-silo update"
    ),
    "ULDP-GROUP": Capabilities(
        private=True,
        per_user=False,
        reads_users=True,
        clipped="per-record gradient",
        group_privacy=True,
    ),
    "ULDP-SGD": Capabilities(
        private=True, per_user=True, reads_users=True, clipped="per-user gradient"
    ),
    "ULDP-AVG": Capabilities(
        private=True, per_user=True, reads_users=True, clipped="per-user update"
    ),
}
#: The built-in method families, in the registry's order (:func:`register_family` adds families of your own to
#: :data:`FAMILY_CAPABILITIES`, not here).
FAMILIES: tuple[str, ...] = tuple(FAMILY_CAPABILITIES)
#: The names of the registry (``k`` stands for a positive integer group size).
KNOWN_METHODS: tuple[str, ...] = (
    "DEFAULT",
    "ULDP-NAIVE",
    "ULDP-GROUP-k",
    "ULDP-GROUP-max",
    "ULDP-GROUP-median",
    "ULDP-SGD",
    "ULDP-SGD-w",
    "ULDP-AVG",
    "ULDP-AVG-w",
)
GROUP_PREFIX = "ULDP-GROUP-"
#: The group sizes of ULDP-GROUP resolved on the federation (records per user) rather than given.
DATA_GROUP_SIZES: tuple[str, ...] = ("max", "median")


@dataclass(frozen=True)
class MethodSpec:
    """A parsed method name.

    Attributes:
        name: The canonical registry name (``"ULDP-GROUP-8"``, ``"ULDP-AVG-w"``, ...).
        family: One of :data:`FAMILIES`.
        enhanced_weights: ULDP-SGD/AVG: ``w_su = n_su / N_u`` (``-w``, Eq. (3)) instead of ``1 / |S|``.
        group_size: ULDP-GROUP: ``k`` (an int, ``"max"`` or ``"median"``); otherwise ``None``.
    """

    name: str
    family: str
    enhanced_weights: bool = False
    group_size: int | str | None = None

    @property
    def capabilities(self) -> Capabilities:
        """What the method's family needs (:data:`FAMILY_CAPABILITIES`)."""
        return FAMILY_CAPABILITIES[self.family]

    @property
    def private(self) -> bool:
        """Whether the method has a user-level DP guarantee (all but DEFAULT)."""
        return self.capabilities.private

    @property
    def reads_users(self) -> bool:
        """Whether training reads who owns each record (all but DEFAULT and ULDP-NAIVE, which use every record of a
        silo alike): with fixed silos, a user-blind method's run does not depend on the users' allocation."""
        return self.capabilities.reads_users

    @property
    def per_user(self) -> bool:
        """Whether the method clips per user and silo (ULDP-SGD/AVG, with user-level sampling, Algorithms 3-4)."""
        return self.capabilities.per_user

    @property
    def per_user_weights(self) -> bool:
        """Whether its weights ``w_su = n_su / N_u`` (Eq. (3)) read every silo's counts of a user (ULDP-SGD-w and
        ULDP-AVG-w): a plain silo's update then depends on the other silos' ``n_su``."""
        return self.per_user and self.enhanced_weights

    @property
    def secure_aggregation(self) -> str:
        """How the method is securely aggregated: :data:`PROTOCOL_1` where its weights are per user (Protocol 1
        computes them without revealing ``n_su``), :data:`MASKED_SUM` otherwise (uniform weights need no counts)."""
        return PROTOCOL_1 if self.per_user_weights else MASKED_SUM


def parse_group_size(method: str) -> int | str | None:
    """The ``k`` of a ``ULDP-GROUP-<k>`` name: an int, ``"max"`` or ``"median"``; ``None`` for other names.

    Raises:
        ValueError: A ``ULDP-GROUP-`` name whose suffix is none of these.

    Example:
        >>> parse_group_size("ULDP-GROUP-8"), parse_group_size("ULDP-GROUP-max"), parse_group_size("ULDP-AVG")
        (8, 'max', None)
    """
    if not isinstance(method, str) or not method.startswith(GROUP_PREFIX):
        return None
    suffix = method[len(GROUP_PREFIX) :]
    if suffix in DATA_GROUP_SIZES:
        return suffix
    if suffix.isdigit() and int(suffix) >= 1:
        return int(suffix)
    raise ValueError(
        f"unknown group size in method {method!r}: use ULDP-GROUP-<k> (k a positive integer), "
        f"-max or -median"
    )


#: A registered family's name: upper-case letters, digits and single hyphens, like the built-in names.
_FAMILY_NAME = re.compile(r"[A-Z][A-Z0-9]*(-[A-Z0-9]+)*")


def register_family(family: str, capabilities: Capabilities) -> MethodSpec:
    """Register a method family of your own: its registry name is the family's name, its needs ``capabilities``.

    The accountant (:func:`uldp.accounting.epsilon_for_method`), the transports and ``uldp.fit`` read only the
    capabilities, so a family registered here is accounted and aggregated like the built-in family with the same
    ones. :func:`uldp.methods.register_method` calls this with the family of a method class; call it alone only where
    no torch is wanted (an accountant or a command line that must parse the name).

    Args:
        family: The new name: upper-case letters, digits and hyphens, neither a built-in name nor a
            ``ULDP-GROUP-`` name nor one registered before.
        capabilities: What its methods need from a federation.

    Returns:
        The family's :class:`MethodSpec` (what :func:`parse_method` returns for it from now on).

    Raises:
        ValueError: A name of the wrong form or already taken; capabilities that are not :class:`Capabilities`.
    """
    if not isinstance(family, str) or not _FAMILY_NAME.fullmatch(family):
        raise ValueError(
            f"a method family's name must be upper-case letters, digits and hyphens (like ULDP-AVG), "
            f"got {family!r}"
        )
    if family in FAMILY_CAPABILITIES or family.startswith(GROUP_PREFIX) or family in KNOWN_METHODS:
        raise ValueError(
            f"method family {family!r} is taken; known methods: {', '.join(known_methods())}"
        )
    if not isinstance(capabilities, Capabilities):
        raise ValueError(
            f"capabilities must be a uldp.method_names.Capabilities, got {type(capabilities).__name__}"
        )
    FAMILY_CAPABILITIES[family] = capabilities
    return MethodSpec(family, family)


def known_methods() -> tuple[str, ...]:
    """The registry's names: the built-in :data:`KNOWN_METHODS`, then the families registered by
    :func:`register_family`.

    Example:
        >>> known_methods()[:3]
        ('DEFAULT', 'ULDP-NAIVE', 'ULDP-GROUP-k')
    """
    return KNOWN_METHODS + tuple(f for f in FAMILY_CAPABILITIES if f not in FAMILIES)


def parse_method(name: str) -> MethodSpec:
    """Parse a registry name.

    Args:
        name: ``"DEFAULT"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (``k`` a positive int, ``max`` or ``median``),
            ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"``, ``"ULDP-AVG-w"`` or a family registered by
            :func:`register_family`.

    Returns:
        The :class:`MethodSpec`.

    Raises:
        ValueError: Unknown name; the message lists the known ones.

    Example:
        >>> parse_method("ULDP-GROUP-8").group_size, parse_method("ULDP-AVG-w").enhanced_weights
        (8, True)
    """
    if name in ("DEFAULT", "ULDP-NAIVE") or (name in FAMILY_CAPABILITIES and name not in FAMILIES):
        return MethodSpec(name, name)
    if name in ("ULDP-SGD", "ULDP-AVG", "ULDP-SGD-w", "ULDP-AVG-w"):
        return MethodSpec(name, name.removesuffix("-w"), enhanced_weights=name.endswith("-w"))
    try:
        group_size = parse_group_size(name)
    except ValueError:
        group_size = None
    if isinstance(group_size, int):
        return MethodSpec(f"{GROUP_PREFIX}{group_size}", "ULDP-GROUP", group_size=group_size)
    if group_size is not None:
        return MethodSpec(name, "ULDP-GROUP", group_size=group_size)
    raise ValueError(
        f"unknown method {name!r}; known methods: {', '.join(known_methods())} (k a positive integer)"
    )
