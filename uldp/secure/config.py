"""Protocol 1's parameters (Section 4): one frozen object, :class:`ProtocolParameters`, passed everywhere.

:class:`ProtocolParameters` holds what a run chooses about the protocol itself (key size, the precision P of
Theorem 4, N_max, worker processes, the test-only small-key flag). It is the same object in every place that runs
the protocol: :class:`uldp.secure.SecureSession`, :class:`uldp.federation.SecureAggregator`,
``uldp.simulation.RunConfig.protocol`` (hence ``uldp run --secure`` and the experiment grids), the ``"protocol"``
object of a ``uldp deploy`` configuration and :class:`uldp.flower.UldpStrategy`.

:class:`ProtocolConfig` is what the server and every silo of one session agree on: those parameters plus the
federation's shape (|S|, |U|, from the counts) and the public bounds of the no-wrap-around check (C, and sigma or
an explicit noise bound), which come from the training run.

This module needs only numpy (no Paillier or cryptography packages), so a run configuration can carry the
parameters without the ``secure`` extra installed.

>>> ProtocolParameters(key_bits=1024, n_max=300, insecure_test_key=True).key_bits
1024
>>> ProtocolParameters(key_bits=1024)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Paillier keys of 1024 bits are insecure; use at least 2048 (default 3072); smaller keys are only for ...
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from uldp.common.checks import check_integer, check_number
from uldp.secure import encoding
from uldp.secure.cost import AUTO, choose_backend

if TYPE_CHECKING:
    from collections.abc import Callable

    from uldp.secure.backends import Backend

DEFAULT_KEY_BITS = 3072
MIN_KEY_BITS = 2048

#: Relative headroom of the bound on a clipped delta coordinate over C that a training run gives the protocol: a
#: float32 coordinate of a vector clipped to norm C can exceed the float64 C by rounding (float32(0.1) > 0.1).
CLIP_HEADROOM = 1e-5

#: Largest Paillier modulus a configuration may ask for (key generation grows with the cube of its size).
MAX_KEY_BITS = 16384

#: ``processes="auto"``: every core this process may use (:func:`available_cores`), at most this many (beyond 16 a
#: silo's lattice round measured no faster: issue 43).
AUTO_PROCESSES, MAX_AUTO_PROCESSES = "auto", 16


def available_cores() -> int:
    """The cores this process may use: ``os.sched_getaffinity`` where there is one, else ``os.cpu_count``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - macOS and Windows
        return os.cpu_count() or 1


def auto_workers() -> int:
    """The worker processes of ``processes="auto"``: :func:`available_cores`, at most :data:`MAX_AUTO_PROCESSES`."""
    return min(available_cores(), MAX_AUTO_PROCESSES)


def _backends() -> dict[str, type[Backend]]:
    """:data:`uldp.secure.backends.BACKENDS`, imported when first needed: the backends need the ``secure`` extra
    (gmpy2, cryptography), the parameters alone do not."""
    from uldp.secure.backends import BACKENDS

    return BACKENDS


def check_key_bits(key_bits: int, *, insecure_test_key: bool = False) -> int:
    """Return ``key_bits`` if allowed: >= 2048 (or >= 256 with the test-only flag), a multiple of 8.

    Raises:
        ValueError: for smaller keys without the flag, or malformed sizes.
    """
    if check_integer("key_bits", key_bits) % 8:
        raise ValueError(f"key_bits must be an integer multiple of 8, got {key_bits!r}")
    floor = 256 if insecure_test_key else MIN_KEY_BITS
    if key_bits < floor:
        raise ValueError(
            f"Paillier keys of {key_bits} bits are insecure; use at least {MIN_KEY_BITS} (default {DEFAULT_KEY_BITS})"
            + (
                ""
                if insecure_test_key
                else "; smaller keys are only for tests (insecure_test_key=True)"
            )
        )
    return key_bits


@dataclass(frozen=True)
class ProtocolParameters:
    """Protocol 1's own parameters, known to the server and all silos.

    Attributes:
        key_bits: Paillier modulus size (3072 by default, about 128-bit security; below 2048 only with
            ``insecure_test_key``; at most :data:`MAX_KEY_BITS`).
        precision: P of Theorem 4: the decoded aggregate is within P of the plain computation, in (0, 1).
        n_max: N_max, the public bound on one user's records over all silos (2000, the paper's); below
            ``key_bits`` (C_LCM = lcm(1..N_max) must stay below the modulus).
        insecure_test_key: Allow keys under 2048 bits (tests and smoke runs only).
        processes: Worker processes for a silo's exponentiations and the server's decryptions, or with the
            lattice backend a silo's expansions and products (results do not depend on it): a count, or
            ``"auto"`` (the default) for every core this process may use, at most :data:`MAX_AUTO_PROCESSES`
            (:attr:`workers`, resolved where the work runs: each silo and the server count their own cores).
        backend: How a round's weighted sum is encrypted and aggregated: ``"auto"`` (the default of every entry
            point a user calls: :meth:`for_user`), the fastest backend that meets the run's security policy, chosen
            and logged with its estimate when the session is set up (:meth:`resolved`,
            :func:`uldp.secure.cost.choose_backend`), or a name in :data:`uldp.secure.backends.BACKENDS`:
            ``"paillier"`` (this object's own default, the protocol's) is Protocol 1 as the paper writes it (one
            ciphertext per parameter, weights n_su C_LCM / N_u); ``"packed-paillier"`` rescales the weights to fixed
            point and packs many parameters per ciphertext (:mod:`uldp.secure.packing`); ``"lattice"`` uses the packed
            backend's per-round rescale (Paillier) and runs the weighted sum in BFV, one user's weight times 16384
            parameters per operation (:mod:`uldp.secure.lattice`, needs the ``lattice`` extra).

    Raises:
        ValueError: naming the bad value and what is allowed.
    """

    key_bits: int = DEFAULT_KEY_BITS
    precision: float = 1e-10
    n_max: int = 2000
    insecure_test_key: bool = False
    processes: int | str = AUTO_PROCESSES
    backend: str = "paillier"

    @property
    def workers(self) -> int:
        """The worker processes to use on this machine: :attr:`processes`, or :func:`auto_workers` for ``"auto"``."""
        if self.processes == AUTO_PROCESSES:
            return auto_workers()
        assert isinstance(self.processes, int)
        return self.processes

    def __post_init__(self) -> None:
        if not isinstance(self.insecure_test_key, bool):
            raise ValueError(
                f"insecure_test_key must be true or false, got {self.insecure_test_key!r}"
            )
        check_key_bits(self.key_bits, insecure_test_key=self.insecure_test_key)
        check_integer("key_bits", self.key_bits, maximum=MAX_KEY_BITS)
        check_number("precision", self.precision, above=0, below=1)
        # lcm(1..N) >= 2^N (N >= 7): a larger N_max could never pass Theorem 4's no-wrap-around check, and C_LCM's
        # computation grows quadratically with it
        check_integer(
            "n_max (below key_bits: C_LCM = lcm(1..N_max) must stay below the modulus)",
            self.n_max,
            maximum=self.key_bits - 1,
        )
        if self.processes != AUTO_PROCESSES:
            check_integer(f"processes (a count or {AUTO_PROCESSES!r})", self.processes)
        backends = _backends()
        if self.backend != AUTO and self.backend not in backends:
            raise ValueError(f"backend must be one of {[AUTO, *backends]}, got {self.backend!r}")

    @classmethod
    def for_user(cls, values: Mapping[str, Any] | ProtocolParameters | None) -> ProtocolParameters:
        """The parameters a user gave (:meth:`from_mapping`; ``None``: none), with the backend ``"auto"`` unless
        they name one: the default of ``RunConfig``, ``UldpStrategy``, ``uldp deploy`` and ``uldp run``."""
        if isinstance(values, ProtocolParameters):
            return values
        if isinstance(values, Mapping) and "backend" not in values:
            values = {**values, "backend": AUTO}
        return cls.from_mapping({"backend": AUTO} if values is None else values)

    def resolved(
        self,
        *,
        users: int,
        parameters: int | None = None,
        fits: Callable[[str], bool] | None = None,
    ) -> ProtocolParameters:
        """These parameters with a named backend: ``"auto"`` replaced by
        :func:`uldp.secure.cost.choose_backend`'s choice for ``users`` and ``parameters`` (logged with its
        estimate), any other backend kept."""
        if self.backend != AUTO:
            return self
        return replace(self, backend=choose_backend(users=users, parameters=parameters, fits=fits))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | ProtocolParameters) -> ProtocolParameters:
        """The parameters from a JSON object (``{"key_bits": 512, ...}``), or ``values`` itself if it is one.

        Raises:
            ValueError: not an object, an unknown field (the message lists the allowed ones) or a bad value.
        """
        if isinstance(values, ProtocolParameters):
            return values
        allowed = sorted(f.name for f in fields(cls))
        if not isinstance(values, Mapping) or set(values) - set(allowed):
            raise ValueError(
                f"'protocol' must be an object with fields among {allowed}, got {values!r:.200}"
            )
        return cls(**values)


@dataclass(frozen=True)
class ProtocolConfig:
    """Everything public about one session of Protocol 1: its parameters, the federation's shape and the bounds.

    Attributes:
        n_silos: |S|.
        n_users: |U|.
        clip: C, the bound on every coordinate of a clipped delta.
        sigma: Noise multiplier; each silo adds N(0, sigma^2 C^2 / |S|) noise (Algorithm 3).
        noise_bound: Bound on |noise coordinate|; None derives it from sigma, C and a 2^-128 Gaussian tail.
        parameters: The protocol's :class:`ProtocolParameters`.

    Raises:
        ValueError: before any message is sent: a bad size or bound, a bad key size, or a possible wrap-around
            (Theorem 4's condition 2), naming what to change.
    """

    n_silos: int
    n_users: int
    clip: float
    sigma: float = 0.0
    noise_bound: float | None = None
    parameters: ProtocolParameters = field(default_factory=ProtocolParameters)

    def __post_init__(self) -> None:
        check_integer("n_silos", self.n_silos)
        check_integer("n_users", self.n_users)
        check_number("clip", self.clip, at_least=0, finite=True)
        check_number("sigma", self.sigma, at_least=0, finite=True)
        if self.noise_bound is not None:
            check_number("noise_bound", self.noise_bound, at_least=0, finite=True)
        if not isinstance(self.parameters, ProtocolParameters):
            raise ValueError(
                f"parameters must be a ProtocolParameters, got {type(self.parameters).__name__}"
            )
        # "auto": the strictest policy, as the server cannot see the silos' and every party must choose alike
        object.__setattr__(
            self, "parameters", self.parameters.resolved(users=self.n_users, fits=self._fits)
        )
        self.backend.check_config(self)  # before any message is sent

    def _fits(self, backend: str) -> bool:
        """Whether this session's checks pass with ``backend`` (the packed rescale needs room in the key)."""
        try:
            replace(self, parameters=replace(self.parameters, backend=backend))
        except ValueError:
            return False
        return True

    @classmethod
    def for_training(
        cls,
        n_silos: int,
        n_users: int,
        *,
        clip: float,
        sigma: float,
        parameters: ProtocolParameters,
    ) -> ProtocolConfig:
        """The session of a training run with clipping bound C and noise multiplier sigma (Algorithm 3): C with
        :data:`CLIP_HEADROOM` bounds the deltas, sigma C / sqrt(|S|) Gaussian noise (a 2^-128 tail) the noise."""
        return cls(
            n_silos=n_silos,
            n_users=n_users,
            clip=clip * (1 + CLIP_HEADROOM),
            sigma=sigma,
            parameters=parameters,
        )

    @property
    def backend(self) -> type[Backend]:
        """The session's backend class (:data:`uldp.secure.backends.BACKENDS`); each role makes its own instance."""
        return _backends()[self.parameters.backend]

    @property
    def layout(self) -> Any:
        """The backend's own sizes (the packed backend's :class:`~uldp.secure.packing.PackedLayout`, the lattice
        backend's ``LatticeLayout``; None for the paper's).

        Raises:
            ValueError: if they do not fit the key (or, for the lattice backend, 128-bit parameters).
        """
        return self.backend.layout(self)

    @property
    def resolution_bits(self) -> int:
        """Fractional bits f of the encoding: (|U| + |S|) 2^-f / 2 <= P (P / 2 for the packed backends, whose
        fixed-point weights take the other half), as the backend sets it."""
        return self.backend.resolution_bits(self)

    @property
    def c_lcm(self) -> int:
        """C_LCM = lcm(1, ..., N_max)."""
        return encoding.lcm_up_to(self.parameters.n_max)

    @property
    def effective_noise_bound(self) -> float:
        """Bound on any noise coordinate used by the no-wrap-around check."""
        if self.noise_bound is not None:
            return self.noise_bound
        return encoding.noise_tail_bound(sigma=self.sigma, clip=self.clip, n_silos=self.n_silos)
