"""What is legal but likely a mistake in a federation, said before any training (issue 42): a silo too small to
train, a single silo, a delta above ``1 / |U|``, noise that drowns the run's signal. :func:`uldp.fit` warns each
finding as a :class:`FederationWarning`; nothing here names a patient (counts only).
"""

from __future__ import annotations

import math


class FederationWarning(UserWarning):
    """A federation that trains, but not as its engineer likely meant (:func:`federation_warnings`)."""


def federation_warnings(
    silo_records: dict[str, int],
    n_users: int,
    *,
    delta: float,
    sigma: float | None,
    q: float | None,
    parameters: int,
    rounds: int,
) -> list[str]:
    """What is legal but likely a mistake, before any training: a silo too small to train (one record), a single
    silo (no federation: the guarantee is then per user within it), delta above ``1 / |U|`` (a mechanism that
    releases one user's records outright meets such a delta; the paper takes delta well below ``1 / |U|``,
    settings.md), and noise that drowns the signal of the whole run.

    The last is a signal-to-noise bound of Algorithm 3: a round's clipped sum has norm at most ``q |U| C``
    (each sampled user's weights sum to at most 1), about ``q |U| C / sqrt(d)`` per coordinate of ``d``, against
    each coordinate's noise ``sigma C``; over ``T`` rounds the signal adds up ``T`` times and the noise
    ``sqrt(T)`` times, so ``sqrt(T) q |U| / (sigma sqrt(d)) < 1`` means the noise exceeds even the largest signal
    the run could carry: an epsilon too small to learn anything at these settings.

    Args:
        silo_records: Records per silo, by the silo's name (a count, never a patient id).
        n_users: |U|.
        delta: The run's delta.
        sigma: The noise multiplier (None for a method without noise).
        q: The user sampling rate (None: every user).
        parameters: d, the model's trained parameters.
        rounds: T.

    Returns:
        One line per finding (empty when none).
    """
    found = [
        f"silo {name!r} has {count} record(s): too few to train a local model on"
        for name, count in silo_records.items()
        if count < 2
    ]
    if len(silo_records) == 1:
        (name,) = silo_records
        found.append(
            f"one silo ({name!r}) holds every record: there is no federation, and the guarantee is per user "
            "within that silo"
        )
    if n_users > 0 and delta > 1 / n_users:
        found.append(
            f"delta {delta:g} is above 1/|U| = {1 / n_users:.3g} ({n_users} users): a guarantee that lets one "
            f"user's records out whole meets it; take delta well below 1/|U|"
        )
    if sigma is not None and sigma > 0:
        ratio = (
            math.sqrt(rounds)
            * (1.0 if q is None else q)
            * n_users
            / (sigma * math.sqrt(parameters))
        )
        if ratio < 1:
            found.append(
                f"sigma {sigma:.4g} drowns the run's signal: sqrt(T) q |U| / (sigma sqrt(d)) = {ratio:.2g} < 1 "
                f"(T = {rounds} rounds, {n_users} users, d = {parameters} parameters), so the model cannot "
                "learn at this epsilon; raise epsilon, the rounds, the users or q, or use a smaller model"
            )
    return found
