"""Who owns each record (its user) and who holds it (its silo): the allocation schemes of the paper's experiments.

The paper (Section 5.1) distributes records over users and silos with uniform or Zipf distributions and leaves the
details open; ``settings.md`` ("Allocation details the paper leaves open") fixes them and this module follows it.

Datasets without fixed silos (Creditcard, MNIST, synthetic):

* ``uniform``: users and silos are both assigned by a uniformly random permutation of a balanced list, so each
  record's user (silo) is uniform and every user (silo) gets ``floor`` or ``ceil`` of ``n / |U|`` (``n / |S|``).
* ``uniform-with-replacement``: each record draws its silo, then its user, uniformly at random and independently
  (with replacement, as the authors' code draws them): users' sizes follow a multinomial, some users may get no
  record.
* ``zipf``: each record draws its user from a bounded Zipf(``user_alpha``) over user ranks (user 0 is the
  largest); for each user a random permutation of the silos gets bounded Zipf(``silo_alpha``) probabilities and
  each of its records draws its silo from them. Users may end up with no record.
* ``zipf-noniid``: the ``zipf`` records-per-user targets, but each user holds at most ``n_labels`` labels. Each
  user draws a random set of ``n_labels`` labels (repaired so that every label has a holder); the records of each
  label are shared among its holders in proportion to the holders' targets (largest-remainder rounding). Silos as
  in ``zipf``.

Datasets whose silo of each record is fixed by FLamby (HeartDisease, TcgaBrca) keep that silo; only users are drawn.
Records are handled in *units*: a unit is ``m`` records of one silo, with ``m = 2`` for survival data (the Cox loss
needs at least two records of a user in a silo) and ``m = 1`` otherwise; a silo's leftover ``size mod m`` records
join one of its units. A unit always belongs to a single user, so every (user, silo) pair with records has at least
``m`` of them by construction.

* ``uniform``: units go to users by a uniformly random balanced permutation.
* ``uniform-with-replacement``: each unit draws its user uniformly at random, independently (the authors' code:
  ``random_state.choice(n_users, size=n_units, replace=True)`` over the pairs of TcgaBrca); users' sizes follow a
  multinomial, so the largest user holds more records than under ``uniform``, and some users may hold none.
* ``zipf``: every user gets one unit, the remaining units are drawn from a bounded Zipf(``user_alpha``) over users;
  each user (in rank order) picks a primary silo uniformly, each of its units goes to the primary silo with
  probability 0.8 and to each other silo with probability 0.2 / (|S| - 1); when the chosen silo has no unit left,
  the unit moves on to the next silo (cyclically) with room. This is the authors' scheme, in units.
"""

from __future__ import annotations

import numpy as np

from uldp.common.checks import check_integer, check_positive
from uldp.data.base import Allocation, FederatedDataset

#: The allocation schemes; ``uniform-with-replacement`` is the authors' uniform (every draw independent).
SCHEMES: tuple[str, ...] = ("uniform", "zipf", "zipf-noniid", "uniform-with-replacement")
WITH_REPLACEMENT = "uniform-with-replacement"
#: Labels per user of the paper's non-iid allocation (Section 5.1, MNIST): the default of ``allocate``,
#: ``RunConfig`` and the command line alike.
PAPER_N_LABELS = 2
PRIMARY_SILO_SHARE = 0.8


def zipf_weights(n_ranks: int, alpha: float) -> np.ndarray:
    """Bounded Zipf probabilities ``p_k ∝ k^(-alpha)`` over ranks ``k = 1..n_ranks``.

    Args:
        n_ranks: Number of ranks (>= 1).
        alpha: Exponent (> 0).

    Returns:
        Probabilities, shape ``[n_ranks]``, decreasing, summing to 1.

    Example:
        >>> zipf_weights(2, 1.0).round(4).tolist()
        [0.6667, 0.3333]
    """
    weights = np.arange(1, n_ranks + 1, dtype=np.float64) ** (-alpha)
    return weights / weights.sum()


def _balanced_assignment(rng: np.random.Generator, n_items: int, n_bins: int) -> np.ndarray:
    """A uniformly random assignment of ``n_items`` to ``n_bins`` in which bin sizes differ by at most one."""
    return rng.permutation(np.arange(n_items) % n_bins)


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Split the integer ``total`` in proportion to ``weights`` (Hamilton's method); equal split if all are 0."""
    if weights.sum() <= 0:
        weights = np.ones_like(weights, dtype=np.float64)
    quota = total * weights / weights.sum()
    shares = np.floor(quota).astype(np.int64)
    remainder_order = np.argsort(-(quota - shares), kind="stable")
    shares[remainder_order[: total - shares.sum()]] += 1
    return shares


def _zipf_users(rng: np.random.Generator, n_records: int, n_users: int, alpha: float) -> np.ndarray:
    return rng.choice(n_users, size=n_records, p=zipf_weights(n_users, alpha))


def _zipf_silos(
    rng: np.random.Generator, user: np.ndarray, n_users: int, n_silos: int, alpha: float
) -> np.ndarray:
    """Each user's silos in a random order get Zipf(alpha) probabilities; each record draws its silo from them."""
    silo_order = rng.permuted(np.tile(np.arange(n_silos), (n_users, 1)), axis=1)
    rank = rng.choice(n_silos, size=len(user), p=zipf_weights(n_silos, alpha))
    return silo_order[user, rank]


def _label_sets(
    rng: np.random.Generator, n_users: int, n_classes: int, n_labels: int
) -> np.ndarray:
    """Random ``[n_users, n_labels]`` label sets (distinct within a user) in which every class has a holder."""
    sets = np.stack([rng.choice(n_classes, size=n_labels, replace=False) for _ in range(n_users)])
    for missing in rng.permutation(n_classes):
        holders = np.bincount(sets.ravel(), minlength=n_classes)
        if holders[missing] > 0:
            continue
        # Pigeonhole: n_users * n_labels >= n_classes slots, so some covered class has >= 2 holders to give one up.
        crowded = rng.choice(np.flatnonzero(holders >= 2))
        positions = np.argwhere(sets == crowded)
        row, column = positions[rng.integers(len(positions))]
        sets[row, column] = missing
    return sets


def _noniid_users(
    rng: np.random.Generator, labels: np.ndarray, target_counts: np.ndarray, n_labels: int
) -> np.ndarray:
    """Users of records such that each user holds at most ``n_labels`` labels, sizes following ``target_counts``."""
    classes, class_index = np.unique(labels, return_inverse=True)
    n_users = len(target_counts)
    labels_each = min(n_labels, len(classes))
    if n_users * labels_each < len(classes):
        raise ValueError(
            f"n_users * n_labels = {n_users} * {labels_each} cannot cover the {len(classes)} labels of the data"
        )
    sets = _label_sets(rng, n_users, len(classes), labels_each)
    user = np.empty(len(labels), dtype=np.int64)
    for c in range(len(classes)):
        holders = np.flatnonzero((sets == c).any(axis=1))
        records = rng.permutation(np.flatnonzero(class_index == c))
        shares = _largest_remainder(len(records), target_counts[holders] / labels_each)
        user[records] = np.repeat(holders, shares)
    return user


def _silo_units(
    rng: np.random.Generator, silo_of_record: np.ndarray, n_silos: int, unit: int
) -> list[list[np.ndarray]]:
    """Cut each silo's records (shuffled) into units of ``unit`` records; leftovers join the silo's last unit.

    Returns, for each silo, the list of its units (arrays of record indices).
    """
    units = []
    for s in range(n_silos):
        records = rng.permutation(np.flatnonzero(silo_of_record == s))
        n_units = len(records) // unit
        if n_units == 0:
            raise ValueError(
                f"silo {s} has {len(records)} records, fewer than the {unit} a user needs there"
            )
        cuts = np.arange(1, n_units) * unit
        units.append(np.split(records, cuts))
    return units


def _fixed_silo_users(
    rng: np.random.Generator,
    dataset: FederatedDataset,
    n_users: int,
    scheme: str,
    user_alpha: float,
) -> np.ndarray:
    """Users of records for datasets with FLamby's fixed silos (module docstring, second part)."""
    assert dataset.train_silo is not None and dataset.n_fixed_silos is not None
    n_silos = dataset.n_fixed_silos
    unit = (
        2 if dataset.task == "survival" else 1
    )  # Cox partial likelihood needs >= 2 records per (user, silo)
    units = _silo_units(rng, dataset.train_silo, n_silos, unit)
    units_per_silo = np.array([len(silo_units) for silo_units in units])
    n_units = int(units_per_silo.sum())
    user = np.empty(dataset.n_train, dtype=np.int64)

    if scheme in ("uniform", WITH_REPLACEMENT):
        owners = (
            _balanced_assignment(rng, n_units, n_users)
            if scheme == "uniform"
            else rng.integers(n_users, size=n_units)
        )
        for owner, records in zip(
            owners, (r for silo_units in units for r in silo_units), strict=True
        ):
            user[records] = owner
        return user

    if n_users > n_units:
        raise ValueError(
            f"n_users={n_users} exceeds the {n_units} units of {unit} record(s) of {dataset.name}: "
            f"the zipf scheme gives every user at least {unit} record(s)"
        )
    units_of_user = 1 + np.bincount(
        _zipf_users(rng, n_units - n_users, n_users, user_alpha), minlength=n_users
    )
    free = units_per_silo.copy()
    for u in range(n_users):
        primary = rng.integers(n_silos)
        probabilities = np.full(n_silos, (1.0 - PRIMARY_SILO_SHARE) / max(n_silos - 1, 1))
        probabilities[primary] = PRIMARY_SILO_SHARE if n_silos > 1 else 1.0
        for s in rng.choice(n_silos, size=units_of_user[u], p=probabilities):
            while free[s] == 0:  # silo full: move on to the next silo with room
                s = (s + 1) % n_silos
            free[s] -= 1
            user[units[s][free[s]]] = u
    return user


#: Most users and silos an allocation may have: the counts n[s, u] and the per-user arrays stay small (the paper's
#: largest federation has 10,000 users and 6 silos), and a mistyped 1e12 is refused instead of allocating terabytes.
MAX_USERS = 1_000_000
MAX_SILOS = 1_000


def _check_arguments(
    dataset: FederatedDataset,
    n_users: int,
    n_silos: int | None,
    scheme: str,
    seed: int,
    n_labels: int | None,
    user_alpha: float,
    silo_alpha: float,
) -> int:
    """Validate ``allocate``'s arguments; return the number of silos."""
    if scheme not in SCHEMES:
        raise ValueError(
            f"unknown allocation scheme {scheme!r}; choose one of {', '.join(SCHEMES)}"
        )
    check_integer("n_users", n_users, maximum=MAX_USERS)
    check_integer("seed", seed, minimum=0)
    check_positive("user_alpha", user_alpha)
    check_positive("silo_alpha", silo_alpha)
    if scheme.endswith("-noniid"):
        if dataset.labels is None:
            raise ValueError(
                f"scheme {scheme!r} needs class labels; {dataset.name} is a {dataset.task} dataset"
            )
        check_integer("n_labels", PAPER_N_LABELS if n_labels is None else n_labels)
    elif n_labels is not None:
        raise ValueError(
            f"n_labels={n_labels!r} applies only to the zipf-noniid scheme, not {scheme!r}"
        )
    if dataset.n_fixed_silos is not None:
        if n_silos is not None and n_silos != dataset.n_fixed_silos:
            raise ValueError(
                f"n_silos={n_silos} but {dataset.name} has {dataset.n_fixed_silos} fixed silos (FLamby's centres)"
            )
        if scheme.endswith("-noniid"):
            raise ValueError(
                f"scheme {scheme!r} is not defined for {dataset.name}, whose silos are fixed"
            )
        return dataset.n_fixed_silos
    if n_silos is None:
        raise ValueError(
            f"n_silos is needed for {dataset.name}: its silos are not fixed (got n_silos=None)"
        )
    return check_integer("n_silos", n_silos, maximum=MAX_SILOS)


def allocate(
    dataset: FederatedDataset,
    *,
    n_users: int,
    n_silos: int | None = None,
    scheme: str,
    seed: int,
    n_labels: int | None = None,
    user_alpha: float = 0.5,
    silo_alpha: float = 2.0,
) -> Allocation:
    """Assign every training record a user and a silo (paper Section 5.1; details in the module docstring).

    Args:
        dataset: The dataset whose training records are allocated.
        n_users: Number of users ``|U|``.
        n_silos: Number of silos ``|S|``; for datasets with fixed silos ``None`` or that fixed number.
        scheme: ``"uniform"``, ``"zipf"``, ``"zipf-noniid"`` (needs class labels) or ``"uniform-with-replacement"``.
        seed: Seed of the allocation (same seed, same allocation).
        n_labels: Maximum number of labels per user, for ``zipf-noniid`` only (None: the paper's
            :data:`PAPER_N_LABELS`).
        user_alpha: Zipf exponent of records per user.
        silo_alpha: Zipf exponent of a user's records over silos (datasets without fixed silos).

    Returns:
        The :class:`~uldp.data.base.Allocation` (user and silo of each record).

    Raises:
        ValueError: Unknown scheme, non-positive alpha or counts, ``n_silos`` contradicting fixed silos, or more
            users than the scheme can give records to.

    Example:
        >>> import torch
        >>> from uldp.data.base import FederatedDataset
        >>> x, y = torch.zeros(10, 1), torch.zeros(10)
        >>> data = FederatedDataset("toy", "binary", x, y, x[:0], y[:0])
        >>> allocate(data, n_users=5, n_silos=2, scheme="uniform", seed=0).counts.sum(axis=0).tolist()
        [2, 2, 2, 2, 2]
    """
    n_silos = _check_arguments(
        dataset, n_users, n_silos, scheme, seed, n_labels, user_alpha, silo_alpha
    )
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    n_records = dataset.n_train
    if dataset.train_silo is not None:
        user = _fixed_silo_users(rng, dataset, n_users, scheme, user_alpha)
        silo = np.asarray(dataset.train_silo, dtype=np.int64).copy()
    elif scheme == "uniform":
        user = _balanced_assignment(rng, n_records, n_users)
        silo = _balanced_assignment(rng, n_records, n_silos)
    elif (
        scheme == WITH_REPLACEMENT
    ):  # silos first: they take the same draws whatever |U| (run keys rely on it)
        silo = rng.integers(n_silos, size=n_records)
        user = rng.integers(n_users, size=n_records)
    else:
        user = _zipf_users(rng, n_records, n_users, user_alpha)
        if scheme == "zipf-noniid":
            assert dataset.labels is not None  # _check_arguments: zipf-noniid needs class labels
            user = _noniid_users(
                rng,
                dataset.labels,
                np.bincount(user, minlength=n_users),
                PAPER_N_LABELS if n_labels is None else n_labels,
            )
        silo = _zipf_silos(rng, user, n_users, n_silos, silo_alpha)
    return Allocation(
        user=user.astype(np.int64),
        silo=silo.astype(np.int64),
        n_users=int(n_users),
        n_silos=n_silos,
        scheme=scheme,
        seed=int(seed),
    )


def labels_per_user(allocation: Allocation, labels: np.ndarray) -> np.ndarray:
    """Number of distinct labels among each user's records, shape ``[n_users]`` (0 for users without records)."""
    classes, class_index = np.unique(labels, return_inverse=True)
    present = np.zeros((allocation.n_users, len(classes)), dtype=bool)
    present[allocation.user, class_index] = True
    return present.sum(axis=1)


def summary(allocation: Allocation) -> dict:
    """Records per user (min, median, max, users without records) and the share of a user's records in its top silo.

    Args:
        allocation: An allocation.

    Returns:
        A JSON-ready dict; ``top_silo_share_mean`` averages over users with records.
    """
    counts = allocation.counts
    per_user = counts.sum(axis=0)
    active = per_user > 0
    top_share = counts.max(axis=0)[active] / per_user[active]
    nonzero_pairs = counts[counts > 0]
    return {
        "scheme": allocation.scheme,
        "seed": allocation.seed,
        "n_users": allocation.n_users,
        "n_silos": allocation.n_silos,
        "n_records": int(per_user.sum()),
        "records_per_user_min": int(per_user.min()),
        "records_per_user_median": float(np.median(per_user)),
        "records_per_user_max": int(per_user.max()),
        "users_without_records": int((~active).sum()),
        "records_per_silo": counts.sum(axis=1).tolist(),
        "top_silo_share_mean": float(top_share.mean()) if active.any() else 0.0,
        "min_records_per_user_silo_pair": int(nonzero_pairs.min()) if nonzero_pairs.size else 0,
    }
