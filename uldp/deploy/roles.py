"""The two sides of a method as the deployment needs them: what the server computes and what one silo computes.

:class:`ServerRole` and :class:`SiloRole` are the interfaces :mod:`uldp.deploy.server` and :mod:`uldp.deploy.silo`
drive; :mod:`uldp.deploy.method_roles` implements them for every method of :mod:`uldp.methods`. Both sides derive
what is public from the run configuration and its seed, and their secret draws (a silo's noise, the server's user
sampling) from their own randomness; a silo role sees only its own records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from uldp.federation import RoundWork
    from uldp.policy import GroupRelease, SiloPolicy


class ServerRole(Protocol):
    """The server's side of a method.

    Attributes:
        n_silos: |S|.
        n_users: |U|.
        rounds: T.
        aggregation: The run's aggregation (:func:`uldp.federation.aggregation_kind`): plain, the masked sum or
            Protocol 1.
        fingerprint: :func:`uldp.common.persist.fingerprint` of the run configuration.
        insecure_reproducible_noise: Whether the silos' noise comes from the shared seed (INSECURE, tests only).
        hidden_sample: Whether the silos draw the user sample (:attr:`uldp.deploy.method_roles.DeployConfig`).
    """

    n_silos: int
    n_users: int
    rounds: int
    aggregation: str
    fingerprint: str
    insecure_reproducible_noise: bool
    hidden_sample: bool

    def initial_params(self) -> np.ndarray:
        """The flat initial global model."""

    def sampled_users(self, round_index: int) -> np.ndarray:
        """bool [|U|]: the users sampled in round ``round_index`` (all True without user sampling)."""

    def protocol_config(self) -> Any:
        """The :class:`uldp.secure.ProtocolConfig` of this run (secure runs only)."""

    def apply_aggregate(
        self, params: np.ndarray, aggregate: np.ndarray, round_index: int
    ) -> np.ndarray:
        """The next global model from the decoded sum of the silos' contributions (:mod:`uldp.federation`)."""

    def epsilon(self, releases: int) -> float | None:
        """The user-level epsilon after ``releases`` rounds released (completed or aborted), None without one."""

    def evaluate(self, params: np.ndarray, round_index: int) -> dict:
        """JSON-ready facts about the model after round ``round_index`` (test metrics, epsilon, the epsilon of the
        server's view), for the history."""

    def contribution_bound(self, sampled: np.ndarray, size: int) -> list[float] | None:
        """Per silo, the largest l2 norm its contribution (of ``size`` parameters) may have, or None for none."""


class SiloRole(Protocol):
    """One silo's side of a method (it sees only its own records).

    Attributes:
        silo_id: This silo's id.
        n_silos: |S|.
        aggregation: The run's aggregation (:func:`uldp.federation.aggregation_kind`); secure, its contribution never
            leaves in the clear.
        fingerprint: Fingerprint of the run configuration.
        n_records: Number of records this silo holds.
        counts_row: int64 [|U|]: n_su, this silo's records per user (Protocol 1's input).
        n_users: |U|.
        hidden_sample: Whether the silos draw the user sample (the server sends every user as sampled).
    """

    silo_id: int
    n_silos: int
    aggregation: str
    fingerprint: str
    n_records: int
    counts_row: np.ndarray
    n_users: int
    hidden_sample: bool

    def protocol_config(self) -> Any:
        """The :class:`uldp.secure.ProtocolConfig` of this run."""

    def work(
        self, params: np.ndarray, round_index: int, sampled: np.ndarray, before: Callable[[], None]
    ) -> RoundWork:
        """The round's computation (:class:`uldp.federation.RoundWork`), with this silo's secret stream; ``before``
        runs first (the ledger's admission)."""

    def check_policy(self, policy: SiloPolicy, sampled: np.ndarray | None = None) -> None:
        """Refuse (:class:`uldp.policy.PolicyRefusal`) a run, or a round's user sample, past this silo's policy."""

    def release(self) -> tuple[float | GroupRelease, float]:
        """(noise multiplier the server sees, or ULDP-GROUP's DP-SGD release; sampling rate) of one answer, for the
        silo's ledger."""
