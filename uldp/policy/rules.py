"""A silo's own privacy policy (:class:`SiloPolicy`): what it accepts, parsed from its own configuration, and the
noise arithmetic its checks use (:func:`release_multiplier`, :func:`collusion_scale`, :func:`update_norm_bound`).

The package docstring (:mod:`uldp.policy`) says how a silo enforces it; the ledger is :mod:`uldp.policy.ledger`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from uldp.accounting import ACCOUNTANTS, Adversary
from uldp.common.checks import (
    check_delta,
    check_integer,
    check_positive,
    check_rate,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The prefix of a policy's keys in a Flower node config: ``--node-config 'uldp-policy-epsilon=4'``.
NODE_CONFIG_PREFIX = "uldp-policy-"
#: Who may draw the user sample (:attr:`SiloPolicy.sampler`): the server (it sees, and may choose, the sample) or the
#: silos among themselves, from randomness the server never learns.
SAMPLERS = ("server", "silos")
#: The smallest group, in bits, a silo's policy may accept for the private set union: that of RFC 3526's group 14,
#: the smallest of :data:`uldp.secure.psu.GROUPS` (this layer imports no secure module: ``tests/test_layers.py``).
MIN_UNION_BITS = 2048


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
        min_union_bits: The smallest group, in bits, it runs the private set union in (the server names the group in
            its ``hello``, the union's stage 0, :mod:`uldp.flower.psu`): 2048 (RFC 3526's group 14, about 112-bit
            security, the default) or 3072 (group 15, about 128-bit, as the paper's 3072-bit Paillier key); a floor
            above every group of :data:`uldp.secure.psu.GROUPS` refuses every union. The insecure test group is
            never accepted by this bound, only by the silo's consent to test keys (tests only).
        malicious_server: Whether it asks for a guarantee against a server that deviates (issue 41 items 3-4): a
            secure session starts only with its identity and roster (:class:`uldp.secure.roster.Credentials`, so
            a swapped DH key is refused naming the silo) and never on a backend that cannot check the weights the
            server encrypts (the lattice backend). False is the paper's semi-honest server. The default is false in
            a deployed silo's policy file and for :func:`uldp.fit`; on Flower it is true when the silo's node config
            names its identity and roster (:meth:`from_node_config`).

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
    min_union_bits: int = MIN_UNION_BITS
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
        check_integer("policy min_union_bits", self.min_union_bits, minimum=MIN_UNION_BITS)
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

    @property
    def against(self) -> str:
        """Whom every epsilon this silo reports holds against, in words (its ledger's log lines, its start-up log).

        >>> SiloPolicy(malicious_server=True, colluders=1, q=0.1, sampler="silos").against
        'a malicious server colluding with up to 1 silo(s), the user sample hidden from it (charged at q=0.1)'
        """
        sample = (
            ""
            if self.q == 1.0
            else f", the user sample hidden from it (charged at q={self.q:g})"
            if self.sampler == "silos"
            else ", a user sample it may choose (charged at q=1)"
        )
        return (
            adversary_words(malicious_server=self.malicious_server, colluders=self.colluders)
            + sample
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
    def from_node_config(
        cls, node_config: Mapping[str, Any], *, has_roster: bool = False
    ) -> SiloPolicy:
        """A policy from a Flower node config's ``uldp-policy-<field>`` keys (``-`` for ``_``; text is parsed).

        On Flower, ``malicious_server`` follows the silo's trust material unless its key says otherwise: true when
        the node config names its identity and roster (``has_roster``: the roster is then used, the weights checked
        and the lattice backend refused), false without them (the paper's semi-honest server, which every epsilon
        and the silo's start-up log then name).

        Raises:
            ValueError: a bad value, naming its key.
        """
        values: dict[str, Any] = {"malicious_server": has_roster}
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
        union_bits: int | None = None,
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
            union_bits: The bits of the group the server names for the private set union (its ``hello``).

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
        if union_bits is not None and union_bits < self.min_union_bits:
            raise PolicyRefusal(
                f"the server names a {union_bits}-bit group for the private set union, below this silo's "
                f"min_union_bits {self.min_union_bits}"
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


def adversary_words(*, malicious_server: bool, colluders: int) -> str:
    """The adversary of an epsilon in words: which server (issue 41 items 3-4), and how many silos may collude
    with it (:func:`collusion_scale`).

    >>> adversary_words(malicious_server=False, colluders=0)
    'a semi-honest server with no silo colluding'
    """
    server = "a malicious server" if malicious_server else "a semi-honest server"
    return server + (
        f" colluding with up to {colluders} silo(s)" if colluders else " with no silo colluding"
    )


def collusion_thresholds(thresholds: Mapping[str, Any]) -> tuple[int, int]:
    """The federation's collusion thresholds from every silo's own policy (:attr:`SiloPolicy.colluders`, by silo).

    Each silo scales its share for its own ``t_s`` (:func:`collusion_scale`), so against any ``t <= min_s t_s``
    colluders the honest shares keep variance ``sum_{s honest} scale_s^2 sigma^2 C^2 / |S| >= sigma^2 C^2``: every
    epsilon of the released model holds against the smallest threshold. The server's norm bounds allow for the
    largest scaled share.

    Args:
        thresholds: Per silo name, the threshold its policy states (``|S| = len(thresholds)``).

    Returns:
        The smallest and the largest threshold.

    Raises:
        ValueError: a threshold that is not an integer in ``0 .. |S| - 1``, naming the silo.

    >>> collusion_thresholds({"Royal": 1, "General": 2, "St Mary": 1})
    (1, 2)
    """
    if not thresholds:
        raise ValueError("collusion thresholds of no silo")
    for name, colluders in thresholds.items():
        check_integer(f"silo {name!r}'s colluders", colluders, minimum=0)
        if colluders >= len(thresholds):
            raise ValueError(
                f"silo {name!r}'s policy asks for a collusion threshold of {colluders} silo(s); this "
                f"federation has {len(thresholds)} (allowed: colluders < |S|)"
            )
    return min(thresholds.values()), max(thresholds.values())


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
