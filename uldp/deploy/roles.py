"""The two sides of a method as the deployment needs them: what the server computes and what one silo computes.

:class:`ServerRole` and :class:`SiloRole` are the interfaces :mod:`uldp.deploy.server` and :mod:`uldp.deploy.silo`
drive; :mod:`uldp.deploy.method_roles` implements them for every method of :mod:`uldp.methods`. Both sides derive
what is public from the run configuration and its seed, and their secret draws (a silo's noise, the server's user
sampling) from their own randomness; a silo role sees only its own records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from uldp.policy import GroupRelease, SiloPolicy


class ServerRole(Protocol):
    """The server's side of a method.

    Attributes:
        n_silos: |S|.
        n_users: |U|.
        rounds: T.
        secure: Whether the aggregation runs Protocol 1 (ULDP-AVG-w and ULDP-SGD-w).
        masked: Whether the silos' plain contributions are secure-aggregated with Protocol 1's pairwise masks
            (:mod:`uldp.secure.masked_sum`; the other methods).
        fingerprint: :func:`uldp.common.persist.fingerprint` of the run configuration.
        insecure_reproducible_noise: Whether the silos' noise comes from the shared seed (INSECURE, tests only).
    """

    n_silos: int
    n_users: int
    rounds: int
    secure: bool
    masked: bool
    fingerprint: str
    insecure_reproducible_noise: bool

    def initial_params(self) -> np.ndarray:
        """The flat initial global model."""

    def sampled_users(self, round_index: int) -> np.ndarray:
        """bool [|U|]: the users sampled in round ``round_index`` (all True without user sampling)."""

    def protocol_config(self) -> Any:
        """The :class:`uldp.secure.ProtocolConfig` of this run (secure runs only)."""

    def combine(
        self, params: np.ndarray, contributions: list[np.ndarray], round_index: int
    ) -> np.ndarray:
        """The next global model from every silo's contribution (ordered by silo id)."""

    def apply_aggregate(
        self, params: np.ndarray, aggregate: np.ndarray, round_index: int
    ) -> np.ndarray:
        """The next global model from Protocol 1's decoded aggregate sum_s (sum_u w_su delta_su + z_s)."""

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
        secure: Whether its rounds run Protocol 1 (it then never sends a contribution in the clear).
        masked: Whether its contributions leave only masked (:mod:`uldp.secure.masked_sum`).
        fingerprint: Fingerprint of the run configuration.
        n_records: Number of records this silo holds.
        counts_row: int64 [|U|]: n_su, this silo's records per user (Protocol 1's input).
    """

    silo_id: int
    n_silos: int
    secure: bool
    masked: bool
    fingerprint: str
    n_records: int
    counts_row: np.ndarray

    def protocol_config(self) -> Any:
        """The :class:`uldp.secure.ProtocolConfig` of this run."""

    def contribution(self, params: np.ndarray, round_index: int, sampled: np.ndarray) -> np.ndarray:
        """What this silo sends in a plain round (the method's silo-side update)."""

    def secure_inputs(
        self, params: np.ndarray, round_index: int, sampled: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(clipped per-user deltas [|U|, d], this silo's noise [d]) for Protocol 1's masked update."""

    def check_policy(self, policy: SiloPolicy, sampled: np.ndarray | None = None) -> None:
        """Refuse (:class:`uldp.policy.PolicyRefusal`) a run, or a round's user sample, past this silo's policy."""

    def release(self, sampled: np.ndarray) -> tuple[float | GroupRelease, float]:
        """(noise multiplier the server sees, or ULDP-GROUP's DP-SGD release; sampling rate) of one answer, for the
        silo's ledger."""
