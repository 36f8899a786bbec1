"""A rehearsal method: the whole deployment (processes, TLS, keys, Protocol 1, checkpoints) without any data.

Before pointing real silos at each other, operators check connectivity, certificates and keys, and measure what
the network and the protocol cost per round. The rehearsal does exactly the ULDP-AVG-w aggregation of Protocol 1
(sum_s sum_u n_su / N_u * delta_su over sampled users, Algorithm 3 with the weights of Section 4) on synthetic
per-user deltas that depend on the global model, so rounds chain like training; :func:`rehearsal_oracle` computes
the same result in plain numpy, which the deployed run must match to within P per round.

>>> config = RehearsalConfig(n_silos=2, n_users=3, dimension=4, rounds=2, seed=1)
>>> rehearsal_oracle(config).shape
(4,)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from uldp.deploy import wire


@dataclass(frozen=True)
class RehearsalConfig:
    """Shape of a rehearsal federation.

    Attributes:
        n_silos: |S|.
        n_users: |U|.
        dimension: Model size d.
        rounds: T.
        seed: Seed of the record counts and the deltas (simulation randomness, not secrets).
        q: Probability that a user is sampled in a round (Poisson sampling, Algorithm 4).
        key_bits: Paillier modulus size.
        insecure_test_key: Allow keys under 2048 bits (tests, smoke runs).
    """

    n_silos: int = 3
    n_users: int = 4
    dimension: int = 5
    rounds: int = 3
    seed: int = 0
    q: float = 1.0
    key_bits: int = 3072
    insecure_test_key: bool = False

    def __post_init__(self) -> None:
        for name in ("n_silos", "n_users", "dimension", "rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.q <= 1:
            raise ValueError(f"q must be in (0, 1], got {self.q}")

    @property
    def counts(self) -> np.ndarray:
        """n[s, u] in 0..3, every user with at least one record somewhere."""
        counts = np.random.default_rng([self.seed, 0]).integers(0, 4, size=(self.n_silos, self.n_users))
        counts[0, counts.sum(axis=0) == 0] = 1
        return counts

    def sampled(self, round_index: int) -> np.ndarray:
        """bool [|U|]: the users sampled in a round (derived from the seed and the round alone)."""
        return np.random.default_rng([self.seed, 1, round_index]).random(self.n_users) < self.q

    def deltas(self, silo_id: int, params: np.ndarray, round_index: int) -> np.ndarray:
        """[|U|, d]: silo ``silo_id``'s per-user deltas (|coordinate| <= 0.5, zero for users without records)."""
        phase = np.random.default_rng([self.seed, 2, silo_id]).uniform(0, 2 * np.pi, size=(self.n_users, 1))
        values = 0.5 * np.sin(params[None, :] + phase + np.arange(self.dimension) + round_index)
        return np.where(self.counts[silo_id][:, None] > 0, values, 0.0)

    def protocol_config(self):  # noqa: ANN201 - uldp.secure is imported lazily
        """Protocol 1's public parameters for this rehearsal (clip 0.5 bounds every delta coordinate, no noise)."""
        from uldp.secure import ProtocolConfig

        return ProtocolConfig(
            n_silos=self.n_silos, n_users=self.n_users, clip=0.5, key_bits=self.key_bits,
            n_max=max(1, int(self.counts.sum(axis=0).max())), insecure_test_key=self.insecure_test_key,
        )


class _Common:
    def __init__(self, config: RehearsalConfig) -> None:
        self.config = config
        self.n_silos, self.n_users, self.rounds, self.secure = config.n_silos, config.n_users, config.rounds, True
        self.fingerprint = wire.fingerprint({"rehearsal": asdict(config)})

    def protocol_config(self):  # noqa: ANN201
        """See :meth:`RehearsalConfig.protocol_config`."""
        return self.config.protocol_config()


class RehearsalServer(_Common):
    """The server side (:class:`uldp.deploy.roles.ServerRole`): x_{t+1} = x_t + the decoded aggregate."""

    def initial_params(self) -> np.ndarray:
        """Zeros."""
        return np.zeros(self.config.dimension)

    def sampled_users(self, round_index: int) -> np.ndarray:
        """See :meth:`RehearsalConfig.sampled`."""
        return self.config.sampled(round_index)

    def combine(self, params: np.ndarray, contributions: list[np.ndarray], round_index: int) -> np.ndarray:
        """Plain rounds: the sum of the silos' weighted sums."""
        return params + np.sum(contributions, axis=0)

    def apply_aggregate(self, params: np.ndarray, aggregate: np.ndarray, round_index: int) -> np.ndarray:
        """Secure rounds: add Protocol 1's decoded aggregate."""
        return params + aggregate


class RehearsalSilo(_Common):
    """One silo's side (:class:`uldp.deploy.roles.SiloRole`)."""

    def __init__(self, config: RehearsalConfig, silo_id: int) -> None:
        super().__init__(config)
        if not 0 <= silo_id < config.n_silos:
            raise ValueError(f"--silo-id must be in 0..{config.n_silos - 1}, got {silo_id}")
        self.silo_id = silo_id
        self.counts_row = config.counts[silo_id]
        self.n_records = int(self.counts_row.sum())

    def contribution(self, params: np.ndarray, round_index: int, sampled: np.ndarray) -> np.ndarray:
        """Not used: a rehearsal always runs Protocol 1 (the weights n_su / N_u need it)."""
        raise ValueError("the rehearsal runs Protocol 1 only")

    def secure_inputs(self, params: np.ndarray, round_index: int, sampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This silo's deltas and zero noise."""
        return self.config.deltas(self.silo_id, params, round_index), np.zeros(self.config.dimension)


def rehearsal_oracle(config: RehearsalConfig) -> np.ndarray:
    """The final model of a rehearsal computed in plain numpy (no protocol, no processes)."""
    params, counts = np.zeros(config.dimension), config.counts
    totals = counts.sum(axis=0)
    for round_index in range(1, config.rounds + 1):
        weights = counts / totals * config.sampled(round_index)
        params = params + sum(weights[s] @ config.deltas(s, params, round_index) for s in range(config.n_silos))
    return params
