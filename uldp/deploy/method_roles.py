"""The server side and one silo's side of any method of :mod:`uldp.methods`, built from a run configuration.

Every party reads the same configuration (:class:`DeployConfig`: a :class:`uldp.simulation.RunConfig` plus
Protocol 1's public parameters) and derives from its seed what every party may know (the allocation, ULDP-GROUP-k's
flags, the initial model). Each party's secret draws come from its own randomness instead (see below), so a
deployed run follows the in-process computation of :func:`uldp.simulation.run` in distribution, not draw for draw:

- :class:`MethodSilo` loads the dataset, derives the allocation (and ULDP-GROUP-k's flags, Algorithm 2 line 8)
  from the shared seed and keeps only its own records; it trains on those alone. Each round it sends its
  contribution (the method's ``silo_update``: ``Delta_s + z_s``, a DP-SGD delta, or ``sum_u w_su Delta_su + z_s``),
  or, with Protocol 1, its clipped per-user deltas and noise go into the masked update and never leave in clear.
- :class:`MethodServer` holds the global model, samples the users (server-side, Algorithm 4), sums the
  contributions (or takes Protocol 1's decoded aggregate), applies the method's server step, evaluates the model
  on the test set and asks the method's accountant for epsilon. It trains on nothing; it reads the allocation
  (who holds how many records) only for ULDP-GROUP-k's accountant, whose per-silo DP-SGD rates depend on it.

Every random draw of a deployed round (who draws it, from what, who may know it):

- initial model, allocation, ULDP-GROUP-k flags B: drawn by every party from the shared ``config.seed``; everyone
  may know them (public).
- users sampled in round t (Algorithm 4): drawn by the server from its own secret (OS CSPRNG); the server knows
  them, and the silos receive them.
- silo s's noise z_s (Algorithms 1, 3: ULDP-NAIVE, ULDP-SGD/AVG[-w]); its DP-SGD sampling and noise
  (ULDP-GROUP-k); its batch order and dropout masks: drawn by silo s from its own secret (OS CSPRNG); silo s only.
- Paillier key pair (Protocol 1 step 1(a)): drawn by the server with the OS CSPRNG (phe's primes); the public key
  is known to all.
- X25519 key pair of silo s (step 1(b)): drawn by silo s with the OS CSPRNG (``cryptography``); the public key is
  known to all.
- seed R (step 1(c)), hence blinds and mask keys: drawn by silo 0 from ``os.urandom``; known to the silos, never
  to the server.
- AEAD nonces, Paillier randomizers (steps 1-2): drawn by the sender from ``os.urandom`` / ``secrets``; public.
- handshake nonce: drawn by the server from ``secrets.token_bytes``; public.

A silo's secret is ``secrets.randbits(128)`` drawn when its role is built (a :class:`numpy.random.SeedSequence` of it
seeds the method's per-round streams: the noise is a torch generator keyed by 63 bits of that secret stream).
Drawing it from the shared seed would let the server rebuild every silo's noise and subtract it (issue 25;
``tests/test_deploy_security.py`` runs that attack). ``"insecure_reproducible_noise": true`` in the configuration
brings back the shared-seed draws so that a deployed run equals the in-process run bit for bit (tests only): it voids
the privacy guarantee, is logged as a warning by every party and is recorded in the server's result. The in-process
simulation (:func:`uldp.simulation.run`) is always seeded: it models the computation, not the trust boundary.

The configuration file: :class:`uldp.deploy.config.DeployConfig`.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from uldp.accounting import Adversary, epsilon_for_method, epsilon_server_view
from uldp.common.checks import check_integer
from uldp.deploy.config import DeployConfig
from uldp.federation import MethodSilo as FederationSilo, SiloRound, aggregation_kind, update_bounds
from uldp.fitting import PREPARE_STREAM, round_seed
from uldp.methods import check_weights, make_method, user_level
from uldp.methods.base import seed_stream
from uldp.methods.group import GroupMethod
from uldp.models import evaluate as evaluate_model
from uldp.simulation import RunConfig, build_federation
from uldp.training.per_user import flat_parameters, load_flat_parameters

if TYPE_CHECKING:
    from uldp.policy import GroupRelease, SiloPolicy

LOGGER = logging.getLogger("uldp.deploy")


def _as_config(config: DeployConfig | RunConfig) -> DeployConfig:
    return config if isinstance(config, DeployConfig) else DeployConfig(config)


def secret_seed() -> np.random.SeedSequence:
    """A fresh 128-bit secret from the OS CSPRNG, as the root of one party's secret random streams."""
    return np.random.SeedSequence(secrets.randbits(128))


class _MethodRole:
    """What both sides derive from the configuration: the method, its seeds and the federation's shape.

    The shared seed (``config.seed``) gives only what every party may know (allocation, flags, initial model);
    :meth:`secret_round_seed` is the party's own stream (from :func:`secret_seed`; the shared one only with
    ``insecure_reproducible_noise``).
    """

    def __init__(self, config: DeployConfig | RunConfig, dataset: Any) -> None:
        self.config = _as_config(config)
        run = self.config.run
        if run.secure and run.user_weights is not None:
            raise ValueError(
                "Protocol 1 computes the enhanced weights n_su / N_u; a run with fixed user_weights "
                "cannot be secure"
            )
        weights = None if run.user_weights is None else np.asarray(run.user_weights)
        self.method = make_method(run.method, run.hyperparameters(), user_weights=weights)
        self._root = np.random.SeedSequence(run.seed)
        self.insecure_reproducible_noise = self.config.insecure_reproducible_noise
        self.hidden_sample = self.config.hidden_sample
        if self.insecure_reproducible_noise:
            LOGGER.warning(
                "INSECURE: insecure_reproducible_noise draws every silo's noise from the shared seed; "
                "the server can remove it (no privacy). For tests only."
            )
        self._secret_root = self._root if self.insecure_reproducible_noise else secret_seed()
        self.fingerprint = self.config.fingerprint
        self.rounds, self.secure, self.masked = run.rounds, bool(run.secure), self.config.masked
        #: The run's aggregation (:func:`uldp.federation.aggregation_kind`): plain, masked sum or Protocol 1.
        self.aggregation = aggregation_kind(self.method.spec, secure=self.config.secure_aggregation)
        federation, self.data = build_federation(run, dataset)
        self.n_users, self.n_silos = federation.n_users, federation.n_silos
        self._mask = self.method.keep_mask(federation, seed_stream(self._root, PREPARE_STREAM))
        kept = federation.allocation
        self.counts = replace(kept, user=kept.user[self._mask], silo=kept.silo[self._mask]).counts
        self._federation = federation
        if weights is not None:
            check_weights(weights, self.counts)
        if self.secure:
            self.protocol_config()  # its checks (Theorem 4's no-wrap-around) before any party joins

    def secret_round_seed(self, round_index: int) -> np.random.SeedSequence:
        """This party's secret stream of round ``round_index`` (1-based); with ``insecure_reproducible_noise`` the
        shared stream of :func:`uldp.simulation.run`'s round instead."""
        return round_seed(self._secret_root, round_index - 1)

    def protocol_config(self) -> Any:
        """Protocol 1's session: :meth:`uldp.secure.ProtocolConfig.for_training` with the run's C, sigma and
        parameters.

        Raises:
            ValueError: if the run has no clip bound C or no sigma (Protocol 1's no-wrap-around check needs both).
        """
        from uldp.secure.config import ProtocolConfig

        run = self.config.run
        if run.clip is None or run.sigma is None:
            raise ValueError(
                f"Protocol 1 needs the run's clip C and sigma, got clip={run.clip}, sigma={run.sigma} "
                f"(method {run.method!r})"
            )
        return ProtocolConfig.for_training(
            self.n_silos, self.n_users, clip=run.clip, sigma=run.sigma, parameters=run.protocol
        )


class MethodServer(_MethodRole):
    """The server's side of a method (:class:`uldp.deploy.roles.ServerRole`).

    Args:
        config: A :class:`DeployConfig` or a :class:`uldp.simulation.RunConfig`.
        dataset: An already loaded dataset (default: ``uldp.data.load(config.run.dataset)``).
    """

    def __init__(self, config: DeployConfig | RunConfig, dataset: Any = None) -> None:
        super().__init__(config, dataset)
        self._accounted = (
            self._federation.keep(self._mask) if not self._mask.all() else self._federation
        )
        self._model = self._federation.model
        self._initial = flat_parameters(self._model).numpy()

    def initial_params(self) -> np.ndarray:
        """The initial global model (drawn from the seed, as in the simulation)."""
        return self._initial.copy()

    def sampled_users(self, round_index: int) -> np.ndarray:
        """Poisson sampling of users at rate q (Algorithm 4 line 4) from the server's secret stream; all users for
        methods without sampling or when the silos draw it (``hidden_sample``)."""
        if not self.method.spec.per_user or self.hidden_sample:
            return np.ones(self.n_users, dtype=bool)
        return user_level(self.method).sample_users(
            self.n_users, self.secret_round_seed(round_index)
        )

    def combine(
        self, params: np.ndarray, contributions: list[np.ndarray], round_index: int
    ) -> np.ndarray:
        """Plain rounds: the method's server step on ``sum_s`` of the silos' contributions (in silo order)."""
        total = torch.zeros(params.shape, dtype=torch.from_numpy(contributions[0]).dtype)
        for contribution in contributions:
            total += torch.from_numpy(contribution)
        return self._step(params, total)

    def apply_aggregate(
        self, params: np.ndarray, aggregate: np.ndarray, round_index: int
    ) -> np.ndarray:
        """Secure rounds: the server step on Protocol 1's decoded aggregate (in the model's dtype, as in-process)."""
        return self._step(params, torch.as_tensor(aggregate, dtype=torch.from_numpy(params).dtype))

    def _step(self, params: np.ndarray, total: torch.Tensor) -> np.ndarray:
        new = self.method.server_step(
            torch.from_numpy(params), total, n_users=self.n_users, n_silos=self.n_silos
        )
        return new.numpy()

    def epsilon(self, releases: int) -> float | None:
        """The user-level epsilon after ``releases`` rounds released (the method's accountant; completed and
        aborted rounds alike, each one composition); None for a method without a guarantee."""
        epsilon = self.method.epsilon(
            self._accounted, releases, accountant=self.config.run.accountant
        )
        return None if epsilon is None else float(epsilon)

    def evaluate(self, params: np.ndarray, round_index: int) -> dict:
        """Test metrics of the global model, the user-level epsilon after round ``round_index`` (every round index up
        to it is a release, see :mod:`uldp.deploy.server`) and the epsilon of what the server saw
        (``server_view_epsilon``): against a server that sees the sample it draws (issue 41: no amplification by a
        sample the adversary knows), and when it sees each silo's weighted update,
        :func:`uldp.accounting.epsilon_server_view` at the worst-case weight norm 1 (never the data's: the bound must
        not depend on who is in the federation)."""
        load_flat_parameters(self._model, torch.from_numpy(params))
        metrics = evaluate_model(
            self._model, self.data.x_test, self.data.y_test, self.config.run.dataset
        )
        epsilon = self.epsilon(round_index)
        view = epsilon
        hp, spec = self.method.hp, self.method.spec
        q = hp.q if spec.per_user else 1.0
        if epsilon is not None and self.weights_show():
            view = epsilon_server_view(
                sigma=float(self.config.run.sigma or 0.0),
                rounds=round_index,
                delta=hp.delta,
                n_silos=self.n_silos,
                q=q,
                accountant=self.config.run.accountant,
            ).epsilon
        elif (
            epsilon is not None
            and q < 1.0
            and not spec.capabilities.group_privacy
            and not self.hidden_sample  # a sample the server never saw: the model's epsilon
        ):
            view = epsilon_for_method(
                spec.name,
                sigma=float(self.config.run.sigma or 0.0),
                rounds=round_index,
                delta=hp.delta,
                q=q,
                accountant=self.config.run.accountant,
                adversary=Adversary.SERVER_SEES_SAMPLE,
            ).epsilon
        return {
            **{name: float(value) for name, value in metrics.items()},
            "epsilon": epsilon,
            "server_view_epsilon": None if view is None else float(view),
        }

    def weights_show(self) -> bool:
        """Whether the server's view of each silo spends more than the released model: plain rounds of a method
        whose weights are not uniform (enhanced or fixed ``user_weights``)."""
        spec = self.method.spec
        return (
            not self.config.secure_aggregation
            and spec.per_user
            and (spec.enhanced_weights or self.config.run.user_weights is not None)
        )

    def contribution_bound(self, sampled: np.ndarray, size: int) -> list[float] | None:
        """Per silo, the largest l2 norm its contribution may have (issue 30, attack 6;
        :func:`uldp.federation.update_bounds` with the public counts). None for a method without such a bound."""
        return update_bounds(
            self.method, n_silos=self.n_silos, sampled=sampled, size=size, counts=self.counts
        )


class MethodSilo(_MethodRole):
    """One silo's side of a method (:class:`uldp.deploy.roles.SiloRole`): only this silo's records are kept, and
    the round is :class:`uldp.federation.MethodSilo`'s (``silo``).

    Args:
        config: A :class:`DeployConfig` or a :class:`uldp.simulation.RunConfig`.
        silo_id: This silo, ``0 .. n_silos - 1``.
        dataset: An already loaded dataset (default: ``uldp.data.load(config.run.dataset)``).

    Raises:
        ValueError: if ``silo_id`` is out of range.
    """

    def __init__(self, config: DeployConfig | RunConfig, silo_id: int, dataset: Any = None) -> None:
        super().__init__(config, dataset)
        self.silo_id = check_integer("--silo-id", silo_id, minimum=0, maximum=self.n_silos - 1)
        own = self._mask & (self._federation.allocation.silo == silo_id)
        group_size = (
            self.method.group_size(self._federation.keep(self._mask))
            if isinstance(self.method, GroupMethod)
            else 0
        )  # public: the shared allocation's
        federation = self._federation.keep(
            own
        )  # this silo's records only; the rest is dropped here
        del self._federation, self.data
        federation.model.train()
        self.silo = FederationSilo(
            self.method,
            federation,
            silo_id=self.silo_id,
            n_silos=self.n_silos,
            counts=self.counts,
            secure=self.config.secure_aggregation,
            group_size=group_size,
            fixed_weights=self.config.run.user_weights is not None,
        )
        self.federation, self.n_records = federation, self.silo.n_records
        self.counts_row = self.counts[silo_id]

    def check_policy(self, policy: SiloPolicy, sampled: np.ndarray | None = None) -> None:
        """:meth:`uldp.federation.MethodSilo.check_policy`."""
        self.silo.check_policy(policy, sampled)

    def release(self) -> tuple[float | GroupRelease, float]:
        """:meth:`uldp.federation.MethodSilo.release`: what one answer releases."""
        return self.silo.release()

    def work(
        self, params: np.ndarray, round_index: int, sampled: np.ndarray, before: Any
    ) -> SiloRound:
        """The round's computation (:meth:`uldp.federation.MethodSilo.work`) with this silo's secret stream."""
        return self.silo.work(params, self.secret_round_seed(round_index), sampled, before)

    def contribution(self, params: np.ndarray, round_index: int, sampled: np.ndarray) -> np.ndarray:
        """The method's ``silo_update``: what this silo sends in a plain round (noise from this silo's secret)."""
        return self.work(params, round_index, sampled, lambda: None).update()

    def secure_inputs(
        self, params: np.ndarray, round_index: int, sampled: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Clipped per-user deltas ``[|U|, d]`` and noise ``[d]`` for Protocol 1's masked update (ULDP-SGD/AVG-w).

        Raises:
            ValueError: for a method whose weights Protocol 1 does not compute.
        """
        return self.work(params, round_index, sampled, lambda: None).secure_inputs()
