"""What a Flower run's settings mean and what it guarantees: the settings a method's capabilities give meaning
(:func:`check_combination`) and the user-level epsilons :class:`uldp.flower.UldpStrategy` reports, of the released
model (:func:`released_epsilon`: Theorems 1-3, Lemma 4) and of the server's view (:func:`server_view_epsilon`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from uldp.accounting import Adversary, epsilon_for_method, epsilon_server_view
from uldp.method_names import PROTOCOL_1
from uldp.methods.base import needed
from uldp.training.dpsgd import dpsgd_schedule

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.method_names import MethodSpec
    from uldp.methods import Hyperparameters


def check_combination(spec: MethodSpec, *, sigma: Any, epsilon: Any, q: Any, protocol: Any) -> None:
    """Refuse settings the method's capabilities (:data:`uldp.method_names.FAMILY_CAPABILITIES`) give no meaning:
    noise for a method without DP, a user sampling rate for one that samples no users, Protocol 1's parameters for
    one without per-user weights (its secure aggregation is the masked sum)."""
    if not spec.private:
        if sigma is not None or epsilon is not None:
            raise ValueError(
                f"{spec.name} adds no noise: give neither sigma nor epsilon, got sigma={sigma!r}, "
                f"epsilon={epsilon!r}"
            )
    elif (sigma is None) == (epsilon is None):
        raise ValueError(
            f"give sigma or epsilon (a target epsilon, sigma calibrated to it at start), exactly one; "
            f"got sigma={sigma!r}, epsilon={epsilon!r}"
        )
    if epsilon is not None and spec.capabilities.group_privacy:
        raise ValueError(
            f"{spec.name}: give sigma (Theorem 2's epsilon needs k and the silos' kept records, known only after "
            f"the set-up), got epsilon={epsilon!r}"
        )
    if not spec.per_user and q != 1.0:
        raise ValueError(
            f"{spec.name} samples no users (only ULDP-SGD/AVG do, Algorithm 4): q must be 1, got {q!r}"
        )
    if protocol is not None and spec.secure_aggregation != PROTOCOL_1:
        raise ValueError(
            f"Protocol 1 computes per-user weights, which {spec.name} has not (its secure aggregation is the "
            f"masked sum, which takes no protocol parameters); got protocol={protocol!r}"
        )


def group_accounting(hp: Any, k: int, kept: Sequence[int]) -> dict[str, Any]:
    """Theorem 2's accountant arguments from the silos' ``k`` and kept records (as
    :meth:`uldp.methods.group.GroupMethod.accounting_arguments` on the pooled records)."""
    epochs = needed(hp.local_epochs, "local_epochs")
    schedules = [dpsgd_schedule(n, batch_size=hp.batch_size, epochs=epochs) for n in kept if n > 0]
    return {
        "k": k,
        "sample_rates": [s.sample_rate for s in schedules],
        "steps_per_round": [s.steps for s in schedules],
    }


def released_epsilon(
    spec: MethodSpec, hp: Hyperparameters, releases: int, *, group: dict[str, Any]
) -> float:
    """The user-level epsilon of the released model after ``releases`` releases: Theorem 1 (ULDP-NAIVE), Theorem 2
    (ULDP-GROUP, with the silos' ``k`` and kept records in ``group``) or Theorem 3 (ULDP-SGD/AVG, with Lemma 4 for
    q < 1); infinite without noise. A fact of sigma, the releases, delta and q, not of the data the server never
    holds."""
    if not spec.private:
        return math.inf
    return epsilon_for_method(
        spec.name,
        sigma=needed(hp.sigma, "sigma"),
        rounds=releases,
        delta=hp.delta,
        q=hp.q if spec.per_user else 1.0,
        **group,
    ).epsilon


def server_view_epsilon(
    spec: MethodSpec,
    hp: Hyperparameters,
    releases: int,
    *,
    group: dict[str, Any],
    shares_counts: bool,
    hidden_sample: bool,
    n_silos: int,
) -> float:
    """The user-level epsilon of what the server has seen after ``releases`` releases: the released model's with
    secure aggregation or uniform weights, :func:`uldp.accounting.epsilon_server_view` (each silo's own release,
    Theorem 3 per silo) when plain silos share their counts for ULDP-AVG-w (``shares_counts``); with user sampling,
    against a server that sees the sample it draws (:attr:`uldp.accounting.Adversary.SERVER_SEES_SAMPLE`) unless the
    silos draw it (``hidden_sample``). Without user sampling (DEFAULT, ULDP-NAIVE, ULDP-GROUP-k: each silo's update
    is its own Gaussian or DP-SGD release), the released model's."""
    if not spec.per_user:
        return released_epsilon(spec, hp, releases, group=group)
    if not shares_counts:
        return epsilon_for_method(
            spec.name,
            sigma=needed(hp.sigma, "sigma"),
            rounds=releases,
            delta=hp.delta,
            q=hp.q,
            adversary=Adversary.MODEL_READERS if hidden_sample else Adversary.SERVER_SEES_SAMPLE,
        ).epsilon
    return epsilon_server_view(
        sigma=needed(hp.sigma, "sigma"), rounds=releases, delta=hp.delta, n_silos=n_silos, q=hp.q
    ).epsilon
