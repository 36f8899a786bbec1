"""The paper's artificial runtime scan of Protocol 1 (Section 5.2, Figure 11): one encrypted round per setting, each
axis (parameters, users, silos) varied from the default of 16 parameters, 20 users and 3 silos.

The deltas, noise and record counts are drawn from ``seed`` (they do not change the protocol's work, only the
values it carries); the protocol's own secrets come from the OS CSPRNG as always. The authors' "training per
silo" includes 10 local epochs of training; here the silos are given their deltas, so the times are the
protocol's alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.checks import check_integer

if TYPE_CHECKING:
    from uldp.secure.config import ProtocolParameters

#: The paper's artificial default (Section 5.2): parameters, users and silos.
SCAN_DEFAULT: dict[str, int] = {"parameters": 16, "users": 20, "silos": 3}
#: The values of each axis in the paper's Figure 11 (settings.md: parameters 16 to 107, users 10 to 40, silos 3 to 9).
SCAN_AXES: dict[str, tuple[int, ...]] = {
    "parameters": (16, 30, 58, 107),
    "users": (10, 20, 30, 40),
    "silos": (3, 5, 7, 9),
}
#: Seconds per part recorded for each setting (a silo's part is per silo: the silos run in parallel when deployed).
SCAN_PARTS = (
    "paillier keygen",
    "key exchange",
    "blinded histogram",
    "encrypted weights",
    "weighting per silo",
    "aggregation",
)


@dataclass(frozen=True)
class ScanPoint:
    """One measured setting of the scan.

    Attributes:
        axis: the axis varied (``"parameters"``, ``"users"`` or ``"silos"``).
        value: its value; the other two axes are at :data:`SCAN_DEFAULT`.
        repeat: the repeat index (each repeat is a fresh session with fresh keys).
        seconds: seconds per part, keys :data:`SCAN_PARTS`.
    """

    axis: str
    value: int
    repeat: int
    seconds: dict[str, float]

    def as_row(self) -> dict[str, Any]:
        return {"axis": self.axis, "value": self.value, "repeat": self.repeat, **self.seconds}


def scan_point(
    *,
    parameters: int,
    users: int,
    silos: int,
    protocol: ProtocolParameters,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Seconds per part of Protocol 1's set-up and one round at one setting (every user sampled).

    Args:
        parameters: d, the model's parameter count.
        users: |U|.
        silos: |S|.
        protocol: key size and N_max (each user's records are drawn below ``n_max / silos / 2`` per silo).
        rng: draws the record counts, deltas (clipped at C = 0.1) and noise (sigma = 5).

    Returns:
        Seconds per part, keys :data:`SCAN_PARTS`.

    Raises:
        ValueError: a count below 1, or N_max too small for ``silos``.
    """
    from uldp.secure.session import (
        SecureSession,
    )  # needs the secure extra (phe, gmpy2, cryptography)

    for name, value in (("parameters", parameters), ("users", users), ("silos", silos)):
        check_integer(name, value)
    top = protocol.n_max // silos // 2
    if top < 2:
        raise ValueError(
            f"n_max = {protocol.n_max} is too small for {silos} silos; allowed: n_max >= {4 * silos}"
        )
    counts = rng.integers(1, top, size=(silos, users))
    deltas = rng.uniform(-0.1, 0.1, size=(silos, users, parameters)) / np.sqrt(parameters)
    noise = rng.normal(scale=0.5 / np.sqrt(silos), size=(silos, parameters))
    session = SecureSession(counts, protocol, clip=0.1, sigma=5.0)
    session.aggregate(deltas, noise, np.ones(users, dtype=bool))
    last = session.last_round_timings
    return {
        "paillier keygen": session.timings["paillier_keygen"],
        "key exchange": session.timings["key_exchange"],
        "blinded histogram": session.timings["blinded_histogram"],
        "encrypted weights": last["encrypt_weights"],
        "weighting per silo": last["silo_weighting"] / silos,
        "aggregation": last["aggregation"],
    }


def protocol_scan(
    *,
    protocol: ProtocolParameters,
    axes: dict[str, tuple[int, ...]] | None = None,
    repeats: int = 1,
    seed: int = 0,
) -> list[ScanPoint]:
    """Figure 11's scan: every value of every axis, the other axes at :data:`SCAN_DEFAULT`, ``repeats`` times.

    The repeats are interleaved (every setting once, then again) so that a slow spell of a shared machine spreads
    over the settings instead of biasing one of them.

    Args:
        protocol: key size (the paper's 3072 bits by default) and N_max.
        axes: values per axis (default :data:`SCAN_AXES`); keys among ``parameters``, ``users``, ``silos``.
        repeats: fresh sessions per setting.
        seed: draws the counts, deltas and noise.

    Returns:
        One :class:`ScanPoint` per setting and repeat.

    Raises:
        ValueError: an unknown axis or an empty one, or a bad count.
    """
    chosen = dict(SCAN_AXES if axes is None else axes)
    unknown = sorted(set(chosen) - set(SCAN_DEFAULT))
    if unknown or not chosen or any(not values for values in chosen.values()):
        raise ValueError(
            f"axes must map some of {sorted(SCAN_DEFAULT)} to non-empty values, got {chosen!r}"
        )
    check_integer("repeats", repeats)
    rng = np.random.default_rng(seed)
    points = []
    for repeat in range(repeats):
        for axis, values in chosen.items():
            for value in values:
                shape = dict(SCAN_DEFAULT, **{axis: int(value)})
                seconds = scan_point(
                    parameters=shape["parameters"],
                    users=shape["users"],
                    silos=shape["silos"],
                    protocol=protocol,
                    rng=rng,
                )
                points.append(ScanPoint(axis, int(value), repeat, seconds))
    return points
