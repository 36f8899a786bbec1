"""What every party of a ``uldp deploy`` run agrees on: :class:`DeployConfig`, a built-in dataset's settings file.

Configuration file (JSON): the fields of :class:`~uldp.simulation.RunConfig`, among them ``"protocol": {"key_bits": ...,
"precision": ..., "n_max": ..., "insecure_test_key": ..., "processes": ...}``, Protocol 1's
:class:`~uldp.secure.config.ProtocolParameters` (``"secure"``: secure aggregation, true by default for every method:
Protocol 1 for ULDP-AVG-w and ULDP-SGD-w, Protocol 1's pairwise masks alone for the others,
:mod:`uldp.secure.masked_sum`; ``"secure": false`` is the explicit opt-out, and the history then reports
``server_view_epsilon``, larger than ``epsilon`` where the weights are not uniform), plus optionally
``"hidden_sample"``, ``"psu_group"``, ``"min_colluders"`` and ``"insecure_reproducible_noise"``; e.g. ``{"dataset":
"creditcard", "method": "ULDP-AVG-w", "n_users": 100, "rounds": 5, "seed": 0, "secure": true}``.

>>> config = DeployConfig.from_json({"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 4, "rounds": 1,
...                                  "protocol": {"key_bits": 512, "n_max": 100, "insecure_test_key": True}})
>>> config.run.clip, config.protocol.key_bits, DeployConfig.from_json(config.to_json()) == config
(0.1, 512, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from uldp.common.checks import check_integer
from uldp.common.persist import fingerprint
from uldp.method_names import MASKED_SUM, PROTOCOL_1, parse_method
from uldp.secure.psu_messages import DEFAULT_GROUP, group_named
from uldp.simulation import RunConfig


@dataclass(frozen=True)
class DeployConfig:
    """What every party of a deployed federation must agree on.

    Attributes:
        run: The run (dataset, method, users, rounds, seed, hyperparameters, ``secure`` and Protocol 1's
            parameters ``protocol``).
        insecure_reproducible_noise: INSECURE, tests only: every party draws its secret randomness (the silos'
            noise, the server's user sampling) from the shared seed, so the run equals the in-process one, and the
            server can remove every silo's noise. Never in a deployment that promises privacy.
        mask_updates: Secure aggregation of the methods Protocol 1 does not run (all but ULDP-AVG-w and ULDP-SGD-w):
            each silo's contribution leaves masked with Protocol 1's pairwise masks (:mod:`uldp.secure.masked_sum`),
            the default; False (JSON ``"secure": false``) is the explicit opt-out. Those two methods take
            ``run.secure`` (Protocol 1) instead.
        hidden_sample: Beyond the paper (issue 41 item 1), the silos draw each round's user sample from a seed of
            their secure session (policies with sampler ``"silos"``, :mod:`uldp.secure.sampling`); the server sends
            every user as sampled and never learns the sample. Needs secure aggregation.
        psu_group: The group of the silos' private set union (:data:`uldp.secure.psu.NAMED_GROUPS`):
            ``"modp2048"`` (the default, about 112-bit security) or ``"modp3072"`` (about 128-bit, as a 3072-bit
            Paillier key). Each silo refuses a group below its policy's ``min_union_bits``, and the test group
            without its consent to test keys.
        min_colluders: The collusion threshold the run needs (:class:`uldp.flower.UldpStrategy`'s): the set-up
            stops, naming them, at silos whose policies (``"colluders"`` in their ``policy.json``, which scales
            their noise shares) hold against fewer silos colluding with the server.
    """

    run: RunConfig
    insecure_reproducible_noise: bool = False
    mask_updates: bool = True
    hidden_sample: bool = False
    psu_group: str = DEFAULT_GROUP.name
    min_colluders: int = 0

    def __post_init__(self) -> None:
        for name in ("insecure_reproducible_noise", "mask_updates", "hidden_sample"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        group_named(self.psu_group)
        check_integer("min_colluders", self.min_colluders, minimum=0)
        if self.hidden_sample and not self.secure_aggregation:
            raise ValueError(
                "hidden_sample needs secure aggregation: the silos agree on the sample under its pairwise keys"
            )

    @property
    def masked(self) -> bool:
        """Whether the silos' plain contributions are secure-aggregated by the masked sum (every method but the two
        that run Protocol 1, unless ``mask_updates`` is False)."""
        return self.mask_updates and parse_method(self.run.method).secure_aggregation == MASKED_SUM

    @property
    def secure_aggregation(self) -> bool:
        """Whether the server sees only the sum of the silos' contributions (Protocol 1 or the masked sum)."""
        return bool(self.run.secure) or self.masked

    @property
    def protocol(self) -> Any:
        """Protocol 1's :class:`~uldp.secure.config.ProtocolParameters` (the run's; used when ``run.secure``)."""
        return self.run.protocol

    @classmethod
    def from_json(cls, data: Any) -> DeployConfig:
        """Parse ``{RunConfig fields..., "protocol": {...}, "insecure_reproducible_noise": ...}``.

        Raises:
            ValueError: if it is not an object, a field is unknown (the message lists the allowed ones) or a value
                is bad (RunConfig's own message).
        """
        if not isinstance(data, dict):
            raise ValueError(
                f"a run configuration is a JSON object of RunConfig fields, got {type(data).__name__}"
            )
        data = dict(data)
        insecure = data.pop("insecure_reproducible_noise", False)
        options = {
            "hidden_sample": data.pop("hidden_sample", False),
            "psu_group": data.pop("psu_group", DEFAULT_GROUP.name),
            "min_colluders": data.pop("min_colluders", 0),
        }
        secure = data.get(
            "secure", True
        )  # secure aggregation by default; "secure": false is the explicit opt-out
        if not isinstance(secure, bool):
            raise ValueError(f"secure must be true or false, got {secure!r}")
        protocol_1 = (
            isinstance(data.get("method"), str)
            and parse_method(data["method"]).secure_aggregation == PROTOCOL_1
        )
        if protocol_1:
            data["secure"] = secure
        else:  # the masked sum: kept as mask_updates, outside the run (its fingerprint as it always was)
            data.pop("secure", None)
        run_fields = {f.name for f in fields(RunConfig)}
        unknown = sorted(set(data) - run_fields)
        if unknown:
            raise ValueError(
                f"unknown run configuration field(s) {unknown}; allowed: {sorted(run_fields)} "
                f"and 'insecure_reproducible_noise', 'hidden_sample', 'psu_group', 'min_colluders'"
            )
        weights = data.get("user_weights")
        if weights is not None:
            if not isinstance(weights, list) or not all(isinstance(row, list) for row in weights):
                raise ValueError(
                    f"user_weights must be a list of lists [silos][users], got {weights!r:.80}"
                )
            data["user_weights"] = tuple(tuple(row) for row in weights)
        try:
            run = RunConfig(**data)
        except TypeError as error:  # a missing required field, or a value of the wrong kind
            raise ValueError(f"bad run configuration: {error}") from error
        if protocol_1:
            return cls(run, insecure, **options)
        return cls(run, insecure, mask_updates=secure, **options)

    def to_json(self) -> dict:
        """The resolved configuration as JSON-ready data (what :meth:`from_json` reads back)."""
        return {
            **asdict(self.run),
            "secure": self.secure_aggregation,
            "insecure_reproducible_noise": self.insecure_reproducible_noise,
            # options at their defaults are left out: earlier fingerprints stay
            **({"hidden_sample": True} if self.hidden_sample else {}),
            **({"psu_group": self.psu_group} if self.psu_group != DEFAULT_GROUP.name else {}),
            **({"min_colluders": self.min_colluders} if self.min_colluders else {}),
        }

    @property
    def fingerprint(self) -> str:
        """:func:`uldp.common.persist.fingerprint` of the resolved configuration (defaults filled in)."""
        return fingerprint(self.to_json())
