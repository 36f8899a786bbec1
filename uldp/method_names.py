"""The names of the method registry and their one parser (no torch: the accountant and the CLI read it too).

A registry name is ``"DEFAULT"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (``k`` a positive integer, ``max`` or
``median``), ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"`` or ``"ULDP-AVG-w"`` (Algorithms 1-4 of the paper).
:func:`parse_method` turns one into a :class:`MethodSpec`; :mod:`uldp.methods` builds the method of a spec's
family and :mod:`uldp.accounting` chooses the theorem of its guarantee from the same family.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Method families (``ULDP-SGD`` and ``ULDP-AVG`` include their ``-w`` variants).
FAMILIES: tuple[str, ...] = ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP", "ULDP-SGD", "ULDP-AVG")
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
    def private(self) -> bool:
        """Whether the method has a user-level DP guarantee (all but DEFAULT)."""
        return self.family != "DEFAULT"

    @property
    def reads_users(self) -> bool:
        """Whether training reads who owns each record (all but DEFAULT and ULDP-NAIVE, which use every record of a
        silo alike): with fixed silos, a user-blind method's run does not depend on the users' allocation."""
        return self.family not in ("DEFAULT", "ULDP-NAIVE")

    @property
    def per_user(self) -> bool:
        """Whether the method clips per user and silo (ULDP-SGD/AVG, with user-level sampling, Algorithms 3-4)."""
        return self.family in ("ULDP-SGD", "ULDP-AVG")


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


def parse_method(name: str) -> MethodSpec:
    """Parse a registry name.

    Args:
        name: ``"DEFAULT"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (``k`` a positive int, ``max`` or ``median``),
            ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"`` or ``"ULDP-AVG-w"``.

    Returns:
        The :class:`MethodSpec`.

    Raises:
        ValueError: Unknown name; the message lists the known ones.

    Example:
        >>> parse_method("ULDP-GROUP-8").group_size, parse_method("ULDP-AVG-w").enhanced_weights
        (8, True)
    """
    if name in ("DEFAULT", "ULDP-NAIVE"):
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
        f"unknown method {name!r}; known methods: {', '.join(KNOWN_METHODS)} (k a positive integer)"
    )
