"""What secure aggregation will cost, known before the first round: a round's seconds per backend from the model's
size and the number of users, projected from committed measurements, and the fastest backend a run allows.

The measurements are ``benchmarks/backend_rounds.py``'s (a whole Flower round of ULDP-AVG-w, 3 silos, 40 users,
3072-bit keys, set-up apart; ``benchmarks/results/backend_rounds.json``, which ``tests/test_secure_cost.py`` checks
:data:`MEASURED` against). A silo's work in a round of Protocol 1 is one homomorphic operation per user per
ciphertext of the model (step 2(b): ``prod_u Enc(w_su)^{Delta_su}``, Protocol 1), and the silos work in parallel,
so a round's seconds grow with ``users x parameters``: the estimate interpolates the measured sizes linearly in
parameters (extrapolates from the two largest beyond them) and scales by ``users / 40``. A backend measured at one
size only is scaled in proportion. The numbers come from one shared 2-core machine: read them as orders of
magnitude, and the ratios between backends as the point.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_log = logging.getLogger(__name__)

#: Users of the measured federation (the estimate scales a round by ``users / MEASURED_USERS``).
MEASURED_USERS = 40
#: ``backend -> ((parameters, round seconds), ...)``, smallest first; ``"none"``: Flower without secure aggregation.
MEASURED: dict[str, tuple[tuple[int, float], ...]] = {
    "none": (
        (1997, 5.377271563000249),
        (20001, 1.0979497500002253),
        (199999, 7.987523796999994),
    ),
    "lattice": (
        (1997, 6.39906007799982),
        (20001, 7.272677466000459),
        (199999, 35.305224325999916),
    ),
    "packed-paillier": (
        (1997, 21.40526711700022),
        (20001, 111.64715532500031),
    ),
    "paillier": (
        (1997, 22.11082630100009),
        (20001, 220.40089478500067),
    ),
}
#: ``backend -> set-up seconds`` (keys, proofs, the weights; independent of the model: the least of its measurements,
#: the first of a process paying one-time warm-ups).
SETUP: dict[str, float] = {
    "none": 2.5836139510001885,
    "lattice": 9.702554053000313,
    "packed-paillier": 17.324861608999527,
    "paillier": 8.406836361999922,
}
#: The plain round, beside the backends.
NONE = "none"
#: The backends measured: the names of :data:`uldp.secure.backends.BACKENDS` (``tests/test_secure_cost.py`` checks
#: they are the same), kept here so that an estimate needs no ``secure`` extra.
BACKENDS: tuple[str, ...] = tuple(name for name in MEASURED if name != NONE)
#: The backend name that asks for the choice to be made here (:func:`choose_backend`): the default of
#: :class:`uldp.secure.ProtocolParameters`.
AUTO = "auto"
#: Whether the silos check the server's per-user weights under each backend (``Backend.checks_weights``, mirrored
#: here without the ``secure`` extra; ``tests/test_secure_cost.py`` checks they agree): a silo whose policy asks for
#: ``malicious_server`` refuses a backend that does not (Protocol 1 step 1(b) has no proof of the lattice's weights).
CHECKS_WEIGHTS: dict[str, bool] = {"lattice": False, "packed-paillier": True, "paillier": True}


@dataclass(frozen=True)
class RoundCost:
    """A run's secure aggregation, estimated.

    Attributes:
        backend: One of :data:`BACKENDS`, or ``"none"``.
        parameters: d.
        users: |U|.
        round_seconds: One round, every silo at once (None: the backend was not measured).
        setup_seconds: The set-up, once per run (and after every aborted round).
        projected: The size lies outside the measured ones.
    """

    backend: str
    parameters: int
    users: int
    round_seconds: float | None
    setup_seconds: float | None
    projected: bool

    def line(self) -> str:
        """One line for the operator, before round 1."""
        if self.round_seconds is None:
            return f"secure aggregation ({self.backend}): no measurement to estimate from"
        setup = f"set-up about {self.setup_seconds:.0f} s, then " if self.setup_seconds else ""
        return (
            f"estimate for {self.backend}: {setup}about {self.round_seconds:.3g} s per round, each silo "
            f"computing at once ({self.parameters} parameters, {self.users} users"
            f"{'; projected beyond the measured sizes' if self.projected else ''})"
        )


def _per_measured_user(
    points: tuple[tuple[int, float], ...], parameters: int
) -> tuple[float, bool]:
    """Seconds of a round at ``parameters`` for the measured number of users, and whether it is projected."""
    if len(points) == 1:
        size, seconds = points[0]
        return seconds * parameters / size, parameters != size
    below = [p for p in points if p[0] <= parameters]
    above = [p for p in points if p[0] >= parameters]
    if below and above:
        (x0, y0), (x1, y1) = below[-1], above[0]
        return (y0 if x0 == x1 else y0 + (y1 - y0) * (parameters - x0) / (x1 - x0)), False
    (x0, y0), (x1, y1) = points[:2] if not below else points[-2:]
    return max(y0 + (y1 - y0) * (parameters - x0) / (x1 - x0), 0.0), True


def estimate(backend: str, *, parameters: int, users: int) -> RoundCost:
    """A round's and the set-up's seconds for ``backend`` (or ``"none"``) at this model size and |U|.

    Raises:
        ValueError: an unknown backend.
    """
    if backend not in (NONE, *BACKENDS):
        raise ValueError(f"backend must be one of {[NONE, *BACKENDS]}, got {backend!r}")
    points = MEASURED.get(backend)
    if not points:
        return RoundCost(backend, parameters, users, None, SETUP.get(backend), False)
    seconds, projected = _per_measured_user(points, parameters)
    return RoundCost(
        backend, parameters, users, seconds * users / MEASURED_USERS, SETUP.get(backend), projected
    )


def installed(backend: str) -> bool:
    """Whether this machine can run ``backend`` (the lattice needs the ``lattice`` extra's TenSEAL)."""
    return backend != "lattice" or importlib.util.find_spec("tenseal") is not None


def fastest_backend(*, parameters: int, users: int, allowed: tuple[str, ...] = BACKENDS) -> str:
    """The backend of ``allowed`` (the run's security policy: all three give 128-bit security at 3072-bit keys;
    a policy may insist on the paper's ``"paillier"``) that is installed here and has the fewest estimated
    seconds per round; ``"paillier"``, the paper's, when none was measured.

    Raises:
        ValueError: no allowed backend is installed.
    """
    candidates = [backend for backend in allowed if installed(backend)]
    if not candidates:
        raise ValueError(
            f"none of the allowed backends {list(allowed)} is installed (lattice: pip install 'uldp[lattice]')"
        )
    timed = [
        (cost.round_seconds, backend)
        for backend in candidates
        if (cost := estimate(backend, parameters=parameters, users=users)).round_seconds is not None
    ]
    return min(timed)[1] if timed else ("paillier" if "paillier" in candidates else candidates[0])


def choose_backend(
    *,
    users: int,
    parameters: int | None = None,
    malicious_server: bool = True,
    fits: Callable[[str], bool] | None = None,
) -> str:
    """The backend ``"auto"`` stands for: the fastest installed one that meets the run's security policy and fits
    the run's key (``fits``; the last candidate is taken unasked, and its own check says why it does not fit),
    logged with its estimate.

    Under ``malicious_server`` (the default: the server cannot see the silos' policies, and every party of a
    deployment must choose alike, so ``"auto"`` meets the strictest) only backends whose weights the silos check
    (:data:`CHECKS_WEIGHTS`): the lattice is refused there, and packed Paillier, faster than the paper's at every
    measured size, is chosen; the paper's where the packed rescale does not fit the key. Without ``parameters``
    the backends are compared at the largest size measured for all of them.

    Raises:
        ValueError: no allowed backend is installed.

    >>> choose_backend(users=40, parameters=2000)
    'packed-paillier'
    >>> choose_backend(users=40, parameters=2000, fits=lambda name: name == "paillier")
    'paillier'
    """
    allowed = [name for name in BACKENDS if CHECKS_WEIGHTS[name] or not malicious_server]
    size = (
        parameters
        if parameters is not None
        else min(max(size for size, _ in MEASURED[name]) for name in allowed)
    )
    while len(allowed) > 1 and fits is not None:
        chosen = fastest_backend(parameters=size, users=users, allowed=tuple(allowed))
        if fits(chosen):
            break
        allowed.remove(chosen)
    # the last one left is taken without asking: if it does not fit either, the run's own check says why
    chosen = fastest_backend(parameters=size, users=users, allowed=tuple(allowed))
    _log.info(
        "secure aggregation backend 'auto': %s, the fastest that %s%s; %s",
        chosen,
        "the silos check the weights of" if malicious_server else "fits",
        "" if parameters is not None else " (compared at the largest size measured for all)",
        estimate(chosen, parameters=size, users=users).line(),
    )
    return chosen
