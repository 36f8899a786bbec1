"""The silo is where differential privacy is enforced: its own privacy policy and its record of what it released.

A silo (a hospital) holds a :class:`SiloPolicy` in its own configuration (a Flower SuperNode's ``--node-config``,
:meth:`SiloPolicy.from_node_config`; a deployed silo's policy file, :meth:`SiloPolicy.from_json`), never taken from
the server. Before answering a round it checks the server's request against the policy (:meth:`SiloPolicy.check`:
sigma, local epochs, records, the size of the user sample) and against its :class:`SiloLedger`, the persistent
record of the rounds it answered and of the noise it released: each round index is answered at most once (so the
server can never average two noisy answers of one round, nor subtract two masked updates under the same masks), and
the user-level epsilon of everything released stays within the policy's target. A refusal is a
:class:`PolicyRefusal` whose message names the request's bad value and the policy's bound; the silo logs it and
sends it to the server as its answer's error.

What a release costs (Theorem 3, Lemma 4; :func:`uldp.accounting.epsilon_of_releases`): with secure aggregation the
server sees only the sum, whose noise has multiplier sigma; without it the server sees this silo's update, whose
noise has std ``sigma C / sqrt(|S|)`` against a user's weight ``w_su`` there, up to 1 for a user whose records all
sit in this silo under enhanced weights: multiplier ``sigma / sqrt(|S|)``
(:func:`uldp.accounting.epsilon_server_view`). With uniform weights (``w_su = 1 / |S|``) the view costs what the
released model costs.

User sampling (Algorithm 4) is charged at the policy's own rate ``q`` and by who draws the sample, never at a rate
the server claims: Lemma 4's amplification holds only against an adversary that does not know the sample (the
paper's paragraph "Private user-level sub-sampling"). With ``sampler="server"`` (the default: Protocol 1's server
draws the sample and sends it, so it may choose it, a target in every round) every round is charged at ``q = 1``
(:attr:`~uldp.accounting.Adversary.SERVER_CHOOSES_SAMPLE`); with ``sampler="silos"`` (the silos draw it from
randomness the server never learns) at the policy's ``q``, amplified
(:attr:`~uldp.accounting.Adversary.MODEL_READERS`). A server that repeats one sample and model to average the noise
away is charged every round as such, and refused at the cap.

With a collusion threshold ``t`` (``colluders``) each silo's noise share is scaled so that the noise of the
``|S| - t`` honest silos alone has the run's std (:func:`collusion_scale`).

ULDP-GROUP-k's rounds are record-level DP-SGD at each silo (Algorithm 2); the silo accounts each as a
:class:`GroupRelease` at the group-privacy epsilon of its own DP-SGD (Theorem 2 for this silo: its record-level RDP
curves add over rounds, then RDP group privacy for k, :func:`uldp.accounting.group.group_epsilon_bounds`), what the
method's accountant reports with this silo's schedule. A ledger that holds both kinds of release adds their epsilons,
each at half the policy's delta (basic composition).

The ledger is a JSON file written atomically before the answer leaves the silo (a crash after writing costs budget,
never privacy); without a file it lives in memory and is lost with the process. Beside a ledger file the silo keeps
a marker that it has answered (:data:`ANSWERED_SUFFIX`): a silo whose marker is there and whose ledger is not
refuses to answer (a lost ledger would reset its replay protection and its budget). A Flower silo's ledger file is
:func:`node_ledger_path` unless its node config names one.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uldp.accounting import ACCOUNTANTS, Adversary, PrivacySpent, epsilon_of_releases
from uldp.common.atomic import write_json_atomic
from uldp.common.checks import (
    check_delta,
    check_integer,
    check_number,
    check_positive,
    check_rate,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

LOGGER = logging.getLogger("uldp.policy")
#: The prefix of a policy's keys in a Flower node config: ``--node-config 'uldp-policy-epsilon=4'``.
NODE_CONFIG_PREFIX = "uldp-policy-"
_LEDGER_VERSION = 1
#: Who may draw the user sample (:attr:`SiloPolicy.sampler`): the server (it sees, and may choose, the sample) or the
#: silos among themselves, from randomness the server never learns.
SAMPLERS = ("server", "silos")
#: The marker beside a ledger file that this silo has answered a round (``<ledger>.answered``).
ANSWERED_SUFFIX = ".answered"


@dataclass(frozen=True)
class GroupRelease:
    """One round of ULDP-GROUP-k at one silo: record-level DP-SGD (Algorithm 2), as the silo's ledger accounts it.

    Attributes:
        sigma: The DP-SGD noise multiplier.
        sample_rate: The record-level Poisson rate of its batches.
        steps: Its DP-SGD steps in the round.
        k: The group size (records kept per user).

    Raises:
        ValueError: A value out of range, naming it.
    """

    sigma: float
    sample_rate: float
    steps: int
    k: int

    def __post_init__(self) -> None:
        check_positive("sigma", self.sigma)
        check_number("sample_rate", self.sample_rate, above=0, at_most=1)
        check_integer("steps", self.steps, minimum=0)
        check_integer("k", self.k, minimum=1)


def epsilon_of_group_releases(releases: list[GroupRelease], *, delta: float) -> float:
    """The user-level epsilon of one silo's ULDP-GROUP rounds: the record-level RDP of its DP-SGD steps (they add),
    then RDP group privacy for the largest k (Theorem 2 with settings.md's valid conversion; 0 without releases)."""
    if not releases:
        return 0.0
    from uldp.accounting.group import group_epsilon_bounds
    from uldp.accounting.rdp import rdp_subsampled_gaussian

    def curve(orders: Any) -> Any:
        return sum(
            rdp_subsampled_gaussian(sigma=r.sigma, q=r.sample_rate, steps=r.steps, orders=orders)
            for r in releases
        )

    return float(group_epsilon_bounds(curve, k=max(r.k for r in releases), delta=delta).epsilon)


class PolicyRefusal(ValueError):
    """A silo refuses a request past its policy (the message says which value and which bound)."""


@dataclass(frozen=True)
class SiloPolicy:
    """What one silo accepts, from its own configuration (never from the server).

    Attributes:
        accountant: The accountant of its budget (a name of :data:`uldp.accounting.ACCOUNTANTS`).
        epsilon: The user-level epsilon it will not exceed over everything it released (its ledger's lifetime).
        delta: The delta of that epsilon.
        min_sigma: The smallest noise multiplier it answers with.
        max_rounds: The most rounds it answers in one run.
        max_local_epochs: The most local epochs a round may ask for.
        max_records: The most records a request may say the federation holds (it sizes what the silo allocates).
        min_sampled_users: The smallest user sample (users sampled in a round, over the federation) it answers.
        q: The user sampling rate (Algorithm 4) its rounds are charged at when the silos draw the sample, and the
            rate a server's sample must look like (never the rate the server claims).
        sampler: Who draws the user sample, one of :data:`SAMPLERS`: ``"server"`` (the server sees and may choose
            it: each round charged at ``q = 1``) or ``"silos"`` (hidden from the server: charged at ``q``).
        colluders: The collusion threshold t: how many of the other silos may collude with the server and remove
            their noise shares; its noise share is scaled by :func:`collusion_scale` (0: none).
        malicious_server: Whether it asks for a guarantee against a server that deviates (issue 41 items 3-4): a
            secure session starts only with its identity and roster (:class:`uldp.secure.roster.Credentials`, so
            a swapped DH key is refused naming the silo) and never on a backend that cannot check the weights the
            server encrypts (the lattice backend). False (the default) is the paper's semi-honest server: a
            federation without a roster still runs, as every run before rosters did.

    Raises:
        ValueError: A value of the wrong type or out of range, naming it.
    """

    accountant: str = "rdp"
    epsilon: float = 10.0
    delta: float = 1e-5
    min_sigma: float = 0.5
    max_rounds: int = 1000
    max_local_epochs: int = 100
    max_records: int = 100_000_000
    min_sampled_users: int = 2
    q: float = 1.0
    sampler: str = "server"
    colluders: int = 0
    malicious_server: bool = False

    def __post_init__(self) -> None:
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"policy accountant {self.accountant!r} is not one of {ACCOUNTANTS}")
        check_positive("policy epsilon", self.epsilon)
        check_delta(self.delta)
        check_positive("policy min_sigma", self.min_sigma)
        for name in ("max_rounds", "max_local_epochs", "max_records", "min_sampled_users"):
            check_integer(f"policy {name}", getattr(self, name), minimum=1)
        check_rate("policy q", self.q)
        if self.sampler not in SAMPLERS:
            raise ValueError(f"policy sampler {self.sampler!r} is not one of {list(SAMPLERS)}")
        check_integer("policy colluders", self.colluders, minimum=0)
        if not isinstance(self.malicious_server, bool):
            raise ValueError(
                f"policy malicious_server must be true or false, got {self.malicious_server!r}"
            )

    @property
    def charged_rate(self) -> float:
        """The sampling rate each round is charged at: the policy's ``q`` when the silos draw the sample, 1 when the
        server does (it may put a target in every round: no amplification)."""
        return self.q if self.sampler == "silos" else 1.0

    @property
    def adversary(self) -> Adversary | None:
        """Whom the ledger's epsilon holds against with user sampling (None without: ``q = 1``)."""
        if self.q == 1.0:
            return None
        return (
            Adversary.MODEL_READERS if self.sampler == "silos" else Adversary.SERVER_CHOOSES_SAMPLE
        )

    @classmethod
    def from_json(cls, data: Any) -> SiloPolicy:
        """A policy from a JSON object of its fields (a deployed silo's policy file); missing fields keep defaults.

        Raises:
            ValueError: not an object, an unknown field (the allowed ones listed) or a bad value.
        """
        if not isinstance(data, dict):
            raise ValueError(
                f"a silo policy is a JSON object of {sorted(_FIELDS)}, got {type(data).__name__}"
            )
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise ValueError(f"unknown silo policy field(s) {unknown}; allowed: {sorted(_FIELDS)}")
        return cls(**data)

    @classmethod
    def from_node_config(cls, node_config: Mapping[str, Any]) -> SiloPolicy:
        """A policy from a Flower node config's ``uldp-policy-<field>`` keys (``-`` for ``_``; text is parsed).

        Raises:
            ValueError: a bad value, naming its key.
        """
        values: dict[str, Any] = {}
        for key, value in node_config.items():
            if not str(key).startswith(NODE_CONFIG_PREFIX):
                continue
            name = str(key)[len(NODE_CONFIG_PREFIX) :].replace("-", "_")
            if name not in _FIELDS:
                raise ValueError(
                    f"unknown node config key {key!r}; the policy's keys are "
                    f"{sorted(NODE_CONFIG_PREFIX + n.replace('_', '-') for n in _FIELDS)}"
                )
            values[name] = _parse(_FIELDS[name], value, key)
        return cls(**values)

    def to_json(self) -> dict:
        """The policy as JSON-ready data."""
        return asdict(self)

    def check(
        self,
        *,
        sigma: float | None = None,
        local_epochs: int | None = None,
        records: int | None = None,
        sampled_users: int | None = None,
        n_users: int | None = None,
    ) -> None:
        """Refuse a request past this policy (each argument None when the request does not set it).

        Args:
            sigma: The noise multiplier the request asks this silo to use.
            local_epochs: The local epochs it asks for.
            records: The records it says the federation holds.
            sampled_users: The users it sampled this round (over the federation).
            n_users: |U|: the sample must be one Poisson sampling at the policy's rate ``q`` could draw (Algorithm
                4): more than ``q |U| + sqrt(|U| 40 ln 2 / 2)`` users (Hoeffding: probability below 2^-40) is
                refused, whatever rate the server claims.

        Raises:
            PolicyRefusal: naming the bad value and the policy's bound.
        """
        if sampled_users is not None and n_users is not None:
            most = self.q * n_users + math.sqrt(n_users * 40 * math.log(2) / 2)
            if sampled_users > most:
                raise PolicyRefusal(
                    f"a round that samples {sampled_users} of {n_users} users is no Poisson sample "
                    f"at q={self.q:g}, this silo's policy rate (at most {most:.1f} but with "
                    f"probability 2^-40)"
                )
        if sigma is not None and (
            isinstance(sigma, bool)
            or not isinstance(sigma, (int, float))
            or not sigma >= self.min_sigma
        ):
            raise PolicyRefusal(f"sigma={sigma!r} is below this silo's min_sigma {self.min_sigma}")
        if local_epochs is not None and not _within(local_epochs, 1, self.max_local_epochs):
            raise PolicyRefusal(
                f"local_epochs={local_epochs!r} is outside this silo's 1..{self.max_local_epochs} "
                f"(max_local_epochs)"
            )
        if records is not None and not _within(records, 1, self.max_records):
            raise PolicyRefusal(
                f"total_records={records!r} is outside this silo's 1..{self.max_records} "
                f"(max_records)"
            )
        if sampled_users is not None and not _within(
            sampled_users, self.min_sampled_users, math.inf
        ):
            raise PolicyRefusal(
                f"a round that samples {sampled_users!r} user(s) is below this silo's "
                f"min_sampled_users {self.min_sampled_users}"
            )


_FIELDS = {f.name: f.type for f in fields(SiloPolicy)}


def _within(value: object, low: float, high: float) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def _parse(kind: object, value: Any, key: str) -> Any:
    """A node config value (text or a scalar) as the field's type."""
    if kind == "str":
        return str(value)
    if kind == "bool":
        text = str(value).lower()
        if text not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return text == "true"
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{key} must be a number, got {value!r}") from error
    if kind == "int":
        if not number.is_integer():
            raise ValueError(f"{key} must be an integer, got {value!r}")
        return int(number)
    return number


def release_multiplier(sigma: float, *, n_silos: int, secure: bool, uniform_weights: bool) -> float:
    """The noise multiplier of what the server sees of this silo's answer (see the module docstring).

    Args:
        sigma: The run's noise multiplier (summed noise std sigma C).
        n_silos: |S|.
        secure: Whether the answer goes through secure aggregation (the server sees only the sum).
        uniform_weights: Whether the method weighs every silo's update of a user by 1 / |S| (ULDP-AVG, ULDP-SGD).

    Returns:
        sigma with secure aggregation or uniform weights; ``sigma / sqrt(|S|)`` otherwise (Theorem 3 adapted:
        :func:`uldp.accounting.epsilon_server_view` with weight norm 1).
    """
    sigma = check_positive("sigma", sigma)
    n_silos = check_integer("n_silos", n_silos, minimum=1)
    return sigma if secure or uniform_weights else sigma / math.sqrt(n_silos)


def collusion_scale(*, n_silos: int, colluders: int) -> float:
    """The factor on each silo's noise share so that sigma holds against ``t`` silos colluding with the server.

    Theorem 3's noise is split into |S| shares, ``sigma C / sqrt(|S|)`` per silo (Algorithm 3 line 18), so the sum
    has std ``sigma C``; silos that collude with the server know (and subtract) their own shares, leaving
    ``sigma C sqrt((|S| - t) / |S|)``. Scaling every share by ``sqrt(|S| / (|S| - t))`` gives the ``|S| - t``
    honest shares together std ``sigma C`` again: the guarantee of sigma holds against ``t`` colluders.

    Args:
        n_silos: |S|.
        colluders: t, in ``0 .. |S| - 1``.

    Returns:
        ``sqrt(|S| / (|S| - t))`` (1 without colluders).

    Raises:
        PolicyRefusal: ``t >= |S|`` (no honest silo would be left to add noise).

    >>> collusion_scale(n_silos=4, colluders=3)
    2.0
    """
    n_silos = check_integer("n_silos", n_silos, minimum=1)
    colluders = check_integer("colluders", colluders, minimum=0)
    if colluders >= n_silos:
        raise PolicyRefusal(
            f"a collusion threshold of {colluders} silo(s) needs more than {colluders} silos; this "
            f"federation has {n_silos} (allowed: colluders < |S|)"
        )
    return math.sqrt(n_silos / (n_silos - colluders))


#: t of the noise's norm bound ``std (sqrt(d) + t)``: P(||z|| > std (sqrt(d) + t)) <= exp(-t^2 / 2) = 2^-40.
NOISE_TAIL = math.sqrt(2 * 40 * math.log(2))


def update_norm_bound(*, clip: float, weight_sum: float, noise_std: float, size: int) -> float:
    """The largest l2 norm an honest silo's update ``sum_u w_su clip(Delta_su) + z_s`` may have (issue 30, attack 6).

    The clipped part has norm at most ``C sum_u w_su``; the noise ``z_s ~ N(0, std^2 I_d)`` has norm above
    ``std (sqrt(d) + t)`` with probability at most ``exp(-t^2 / 2)`` (Gaussian concentration of the norm, a
    1-Lipschitz function, around a mean below ``std sqrt(d)``), ``t`` = :data:`NOISE_TAIL`: a server that aborts past
    this bound wrongly blames an honest silo with probability below ``2^-40`` per round.

    Args:
        clip: C.
        weight_sum: ``sum_u w_su`` over the round's users (an upper bound will do).
        noise_std: The silo's noise std per coordinate.
        size: d.

    Returns:
        The bound.
    """
    return clip * weight_sum + noise_std * (math.sqrt(size) + NOISE_TAIL)


class SiloLedger:
    """The silo's persistent record of the rounds it answered and the noise it released; it enforces the policy.

    Args:
        policy: The silo's policy.
        path: The JSON file (created on the first release, replaced atomically), or None to keep it in memory.

    Raises:
        ValueError: the file exists but is no ledger (its content checked field by field).
        PolicyRefusal: the file is missing but its marker (``<path>.answered``) says this silo has answered.
    """

    def __init__(self, policy: SiloPolicy, path: str | Path | None = None) -> None:
        self.policy = policy
        self.path = None if path is None else Path(path)
        self.runs: dict[str, int] = {}
        self.releases: list[tuple[float, float]] = []
        self.group_releases: list[GroupRelease] = []
        if self.path is not None and not self.path.exists() and self.marker.exists():
            raise PolicyRefusal(
                f"silo ledger {self.path} is missing, yet this silo has answered rounds before "
                f"({self.marker} says so): without its ledger it would answer rounds again and forget "
                f"its budget; restore the ledger (or, knowingly, remove the marker)"
            )
        if self.path is not None and self.path.exists():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError) as error:
                raise ValueError(f"silo ledger {self.path} is unreadable: {error}") from error
            self.load(data)

    @property
    def marker(self) -> Path:
        """The file beside the ledger that says this silo has answered (:data:`ANSWERED_SUFFIX`)."""
        if self.path is None:
            raise ValueError("a ledger in memory has no marker")
        return self.path.with_name(self.path.name + ANSWERED_SUFFIX)

    def load(self, data: Any) -> None:
        """Take the record ``data`` (what :meth:`state` returned), checking every field.

        Raises:
            ValueError: it is no ledger.
        """
        path = self.path or "in memory"
        if not isinstance(data, dict) or data.get("version") != _LEDGER_VERSION:
            raise ValueError(f"silo ledger {path} is not a version {_LEDGER_VERSION} ledger")
        runs, releases = data.get("runs"), data.get("releases")
        if not isinstance(runs, dict) or not all(
            isinstance(k, str) and _within(v, 1, 2**62) for k, v in runs.items()
        ):
            raise ValueError(f"silo ledger {path}: 'runs' must map run ids to answered rounds >= 1")
        if not isinstance(releases, list) or not all(
            isinstance(r, list)
            and len(r) == 2
            and all(isinstance(x, (int, float)) for x in r)
            and r[0] > 0
            and 0 < r[1] <= 1
            for r in releases
        ):
            raise ValueError(
                f"silo ledger {path}: 'releases' must be [sigma > 0, 0 < q <= 1] pairs"
            )
        groups = data.get("group_releases", [])
        try:
            if not isinstance(groups, list) or not all(
                isinstance(g, list) and len(g) == 4 for g in groups
            ):
                raise ValueError("not a list of [sigma, sample_rate, steps, k] rows")
            group_releases = [GroupRelease(*g) for g in groups]
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"silo ledger {path}: 'group_releases' must be [sigma > 0, 0 < rate <= 1, steps >= 0, "
                f"k >= 1] rows ({error})"
            ) from error
        self.runs = dict(runs)
        self.releases = [(float(s), float(q)) for s, q in releases]
        self.group_releases = group_releases

    def state(self) -> dict:
        """The record as JSON-ready data (what the file holds)."""
        return {
            "version": _LEDGER_VERSION,
            "runs": dict(self.runs),
            "releases": [list(r) for r in self.releases],
            "group_releases": [[g.sigma, g.sample_rate, g.steps, g.k] for g in self.group_releases],
        }

    def last_round(self, run: str) -> int:
        """The last round index this silo answered in run ``run`` (0: none)."""
        return self.runs.get(run, 0)

    def spent(self, extra: tuple[float, float] | GroupRelease | None = None) -> PrivacySpent:
        """The user-level guarantee of every release (and ``extra``, a release not yet made); Gaussian releases and
        ULDP-GROUP's each at half the delta when the ledger holds both (see the module docstring). With user
        sampling it names its adversary (:attr:`SiloPolicy.adversary`)."""
        releases = self.releases + ([extra] if isinstance(extra, tuple) else [])
        groups = self.group_releases + ([extra] if isinstance(extra, GroupRelease) else [])
        delta = self.policy.delta / 2 if releases and groups else self.policy.delta
        spent = replace(
            epsilon_of_releases(releases=releases, delta=delta, accountant=self.policy.accountant),
            adversary=self.policy.adversary,
        )
        if not groups:
            return spent
        epsilon = epsilon_of_group_releases(groups, delta=delta) + (
            spent.epsilon if releases else 0.0
        )
        return PrivacySpent(epsilon=epsilon, order=math.nan, delta=self.policy.delta)

    def admit(self, run: str, round_index: int, *, multiplier: float | GroupRelease) -> float:
        """Record that this silo answers round ``round_index`` of run ``run``, or refuse.

        Called before the answer is computed; the record is on disk before it returns (a crash afterwards costs
        budget, never privacy).

        Args:
            run: The run's identifier (deploy: the configuration's fingerprint; Flower: the run id).
            round_index: The round (1, 2, ...).
            multiplier: The answer's noise multiplier as the server sees it (:func:`release_multiplier`), or
                ULDP-GROUP's round of DP-SGD (:class:`GroupRelease`). A Gaussian release is charged at the
                policy's :attr:`SiloPolicy.charged_rate`, never at a rate the server claims.

        Returns:
            The user-level epsilon spent once this round is released.

        Raises:
            PolicyRefusal: a round index already answered or older, more than ``max_rounds`` rounds, or a release
                past the policy's epsilon (the message says which).
        """
        last = self.last_round(run)
        if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index <= last:
            raise PolicyRefusal(
                f"round {round_index!r} is not after round {last}, the last this silo answered; a "
                f"silo answers each round once (a repeated answer would let the server average its "
                f"noise away)"
            )
        if round_index > self.policy.max_rounds:
            raise PolicyRefusal(
                f"round {round_index} is past this silo's max_rounds {self.policy.max_rounds}"
            )
        release = (
            multiplier
            if isinstance(multiplier, GroupRelease)
            else (check_positive("multiplier", multiplier), self.policy.charged_rate)
        )
        spent = self.spent(release)
        if spent.epsilon > self.policy.epsilon:
            before = self.spent().epsilon
            what = (
                f"ULDP-GROUP-{release.k}'s DP-SGD, sigma {release.sigma:g}, {release.steps} steps at rate "
                f"{release.sample_rate:.3g}"
                if isinstance(release, GroupRelease)
                else f"noise multiplier {release[0]:.3g} as the server sees it, charged at "
                f"q={release[1]:g} (sampler {self.policy.sampler!r})"
            )
            raise PolicyRefusal(
                f"round {round_index} would bring this silo's user-level epsilon from {before:.3g} to "
                f"{spent.epsilon:.3g} ({what}), past its policy's epsilon {self.policy.epsilon:g} at delta "
                f"{self.policy.delta:g}"
            )
        self.runs[run] = round_index
        if isinstance(release, GroupRelease):
            self.group_releases.append(release)
        else:
            self.releases.append(release)
        if (
            self.path is not None
        ):  # the marker first: a crash between the two leaves a silo that refuses
            write_json_atomic(self.marker, {"ledger": self.path.name})
            write_json_atomic(self.path, self.state())
        LOGGER.info(
            "answering round %d of run %s: user-level epsilon spent %.4g of %g",
            round_index,
            run[:12],
            spent.epsilon,
            self.policy.epsilon,
        )
        return spent.epsilon


def node_ledger_path(*, silo: str, key_file: str | Path, ledger: str | Path | None = None) -> Path:
    """A Flower silo's ledger file: ``ledger`` when its node config names one, else ``<silo>.uldp-ledger.json`` in
    the directory of its key file, the node's own state (never the SuperNode's memory, which a restart or a new run
    resets: issue 41 item 5).

    Args:
        silo: The silo's name (its node config's ``silo``).
        key_file: Its key file (its node config's ``uldp-key-file``).
        ledger: The ledger file its node config names, if any.

    Returns:
        The ledger's path.

    Raises:
        ValueError: A silo name that cannot name a file.

    >>> node_ledger_path(silo="Royal", key_file="/srv/royal/key").as_posix()
    '/srv/royal/Royal.uldp-ledger.json'
    """
    if ledger is not None:
        return Path(ledger)
    if not silo or any(ch in silo for ch in "/\\\0") or silo in {".", ".."}:
        raise ValueError(
            f"silo name {silo!r} cannot name a ledger file (no '/', '\\\\', NUL, '.' or '..'); "
            f"name the ledger in the node config"
        )
    return Path(key_file).with_name(f"{silo}.uldp-ledger.json")
