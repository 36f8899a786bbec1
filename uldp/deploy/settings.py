"""What a deployed server is given and what it returns: :class:`ServerSettings` (how the process runs, apart from
the run configuration), :class:`FederationResult`, and the errors that stop a round or the admission."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from uldp.common.atomic import check_writable
from uldp.common.checks import check_number
from uldp.deploy import keys

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

#: The longest any timeout may be (seconds): a week.
MAX_TIMEOUT = 7 * 24 * 3600.0


class RoundAborted(RuntimeError):
    """A round could not complete (a silo died, timed out or failed); the last good model is kept."""


class AdmissionFailed(RuntimeError):
    """Not every silo joined (or some were refused) before the join timeout."""


@dataclass(frozen=True)
class ServerSettings:
    """How the server process runs (what is not part of the run configuration).

    Attributes:
        address: ``host:port`` to listen on (``0.0.0.0:8080`` to accept silos from other machines).
        checkpoint: File of the last good model (resumed from when it exists).
        join_timeout: Seconds to wait for every silo to join.
        round_timeout: Seconds a silo may take for one stage before the round is aborted.
        master_key: Server's master authentication key (silo keys are derived from it), or None for none.
        certificates: ``(CA certificate, server certificate, server private key)`` PEM bytes for TLS, or None.
        handshake_timeout: Seconds one connection may take to answer the handshake.
        stall_log_seconds: While a stage waits for silos, log every this many seconds which silos it still waits
            for and for how long.

    Raises:
        ValueError: a timeout that is not a finite number in (0, :data:`MAX_TIMEOUT`], a master key that
            :func:`uldp.deploy.keys.check_master_key` refuses, or a checkpoint path that cannot be written.
    """

    address: str = "0.0.0.0:8080"
    checkpoint: Path | None = None
    join_timeout: float = 120.0
    round_timeout: float = 3600.0
    master_key: bytes | None = None
    certificates: tuple[bytes, bytes, bytes] | None = None
    handshake_timeout: float = 30.0
    stall_log_seconds: float = 30.0

    def __post_init__(self) -> None:
        for name in ("join_timeout", "round_timeout", "handshake_timeout", "stall_log_seconds"):
            check_number(
                f"--{name.replace('_', '-')}", getattr(self, name), above=0, at_most=MAX_TIMEOUT
            )
        if self.master_key is not None:
            keys.check_master_key(self.master_key)
        if self.checkpoint is not None:
            check_writable(self.checkpoint, "--checkpoint")


@dataclass
class FederationResult:
    """What a finished (or aborted) server run reports.

    Attributes:
        params: The last good global model.
        rounds_done: Completed rounds, i.e. model updates (including those of a resumed checkpoint).
        resumed_from: The last round index of the checkpoint the run started from (0 without one).
        history: One record per round index asked, in order (the epsilon of record t counts t releases).
            A completed round: round, seconds, per-stage seconds, the role's metrics and epsilon. Stage
            ``silos`` is the wall time of the round's exchanges with the silos, ``silo_compute`` the part the
            slowest silo spent computing in each; the difference is transport (serialisation, gRPC, Flower).
            An aborted round: round, ``aborted`` (why), ``answered`` (the silos whose answers had arrived) and
            epsilon.
        setup_seconds: Seconds spent on Protocol 1's setup (0 without the secure protocol).
        error: Why the run stopped early, or "".
        refused: One line per refused silo.
        insecure_reproducible_noise: True when the run used the INSECURE shared-seed noise (tests only; the server
            could remove every silo's noise, see :mod:`uldp.deploy.method_roles`).
    """

    params: np.ndarray
    rounds_done: int
    resumed_from: int
    history: list[dict] = field(default_factory=list)
    setup_seconds: float = 0.0
    error: str = ""
    refused: list[str] = field(default_factory=list)
    insecure_reproducible_noise: bool = False

    @property
    def last_round(self) -> int:
        """The last round index asked (every index up to it is a release counted in ``history``)."""
        return len(self.history)
