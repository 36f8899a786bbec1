"""What a federation says to the people who run it: a failing silo by its name and cause, one line per round, and
a summary table at the end.

A hospital's engineer watches the ServerApp's log: every line here goes to the ``uldp.flower`` logger once (to
Flower's console handler only when nothing else would show it: a ServerApp process configures no logging of its
own, and a program that configured the root logger would otherwise print each line twice). No line carries a
patient id or a per-patient count: rounds, epsilons, seconds, the silos' names, and the held-out set's metrics.
"""

from __future__ import annotations

import logging
import math
import re
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from uldp.secure.cost import AUTO, NONE, choose_backend, estimate, fastest_backend

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

LOGGER = logging.getLogger("uldp.flower")

#: A silo's own failure as :func:`uldp.flower.client._naming` words it, inside Flower's error reason
#: (``<class '...SiloFailure'>:<'silo 'Hospital B' failed: KeyError: 'outcome''>``, or a LocalGrid's ``SiloFailure:
#: silo ...``).
_NAMED_FAILURE = re.compile(r"silo '[^']*' failed: .*", re.DOTALL)


def silo_failure(reason: str) -> str | None:
    """The silo's own words (``silo 'Hospital B' failed: KeyError: 'outcome'``) in the error reason a SuperNode
    returned for its failing ClientApp, without Flower's wrapping; None when the reason names no silo.

    >>> silo_failure("<class 'uldp.flower.client.SiloFailure'>:<'silo 'Hospital B' failed: KeyError: 'outcome''>")
    "silo 'Hospital B' failed: KeyError: 'outcome'"
    >>> silo_failure("ClientApp timed out") is None
    True
    """
    found = _NAMED_FAILURE.search(reason)
    if found is None:
        return None
    text = found.group(0)
    return text[:-2] if reason.endswith("'>") and text.endswith("'>") else text


def say(level: int, message: str, *args: Any) -> None:
    """Log one line once: through ``uldp.flower`` when a handler would show it (the application configured
    logging), else through Flower's logger (its console handler, which a ServerApp's log shows)."""
    # Flower's state database runs alembic's fileConfig in process, which disables every logger that exists by
    # then (disable_existing_loggers): the round lines must not fall silent with it.
    LOGGER.disabled = False
    if LOGGER.hasHandlers():
        LOGGER.log(level, message, *args)
    else:
        from flwr.common.logger import (
            log,
        )  # Flower's console logger; imported here: only without handlers

        log(level, message, *args)


def fail_on_named_failure(replies: Iterable[Any]) -> None:
    """Stop the run at the first reply whose silo's ClientApp failed, with the silo's name and cause.

    A silo that answers with its own failure (its records do not load, its key does not read) has joined: leaving
    it out would train on the others and exit 0, and waiting for it would end in "did not join". Nodes that do not
    answer at all are left to :func:`uldp.flower.recovery.discover_silos` (a SuperNode restarted under a new id
    leaves its old one behind for a while).

    Raises:
        RuntimeError: ``silo 'Hospital B' failed: KeyError: 'outcome'``.
    """
    for reply in replies:
        if reply.has_error() and (failure := silo_failure(reply.error.reason)) is not None:
            raise RuntimeError(failure)


@contextmanager
def stage(what: str) -> Iterator[None]:
    """Say when a set-up stage that takes seconds to minutes (the private set union, Protocol 1's keys and proofs)
    starts and how long it took, so that a quiet minute reads as work, not as a hang."""
    say(logging.INFO, "set-up: %s ...", what)
    start = time.perf_counter()
    yield
    say(logging.INFO, "set-up: %s done in %.1f s", what, time.perf_counter() - start)


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class RoundReport:
    """One line per completed round and a summary table at the end (what the ServerApp's log shows).

    Args:
        rounds: The completed rounds the run asks for (the lines say ``round r/rounds``).

    Attributes:
        rows: Per completed round: ``round``, ``epsilon`` (so far, every release counted), ``seconds``, ``silos``
            (the names of those that answered) and the held-out set's metrics, if any.
    """

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.rows: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"RoundReport(rounds={self.rounds}, completed={len(self.rows)})"

    def estimate(self, strategy: Any, parameters: int) -> str | None:
        """Log, before round 1, what a round will cost with the strategy's secure aggregation
        (:mod:`uldp.secure.cost`), and the fastest backend when another is chosen; returns the line (None for the
        masked sum, which was not measured)."""
        backend = (
            NONE
            if not strategy.secure
            else strategy.protocol.backend
            if strategy.method.spec.enhanced_weights
            else None
        )
        if backend is None:
            return None
        users = int(strategy.n_users)
        if (
            backend == AUTO
        ):  # the set-up's choice (the silos' policies unseen: the strictest), at this model size
            backend = choose_backend(users=users, parameters=parameters)
        line = estimate(backend, parameters=parameters, users=users).line()
        if backend != NONE:
            fastest = fastest_backend(parameters=parameters, users=users)
            if fastest != backend:
                line += (
                    f"; {estimate(fastest, parameters=parameters, users=users).line()}: "
                    f"protocol={{'backend': {fastest!r}}}"
                )
        say(logging.INFO, "%s", line)
        return line

    def round(
        self,
        round_index: int,
        *,
        epsilon: float,
        seconds: float,
        silos: Sequence[str],
        evaluation: Mapping[str, Any] | None = None,
    ) -> str:
        """Log and keep one completed round; returns its line
        (``round 2/5 (index 2): epsilon 1.23, 14.2 s, 3 silos (A, B, C); test loss 0.41, auc 0.93``)."""
        metrics = {key: float(value) for key, value in (evaluation or {}).items()}
        names = sorted(silos)
        self.rows.append(
            {
                "round": round_index,
                "epsilon": float(epsilon),
                "seconds": float(seconds),
                "silos": names,
                **metrics,
            }
        )
        line = (
            f"round {len(self.rows)}/{self.rounds} (index {round_index}): epsilon "
            f"{_number(float(epsilon))}, {seconds:.1f} s, {len(names)} silos ({', '.join(names)})"
        )
        if metrics:
            line += "; test " + ", ".join(f"{key} {_number(v)}" for key, v in metrics.items())
        say(logging.INFO, "%s", line)
        return line

    def table(self) -> str:
        """The summary: one row per completed round, its epsilon, seconds, silos and held-out metrics."""
        metrics = sorted({key for row in self.rows for key in row} - set(_COLUMNS))
        header = ["round", "epsilon", "seconds", "silos", *metrics]
        lines = [
            [
                str(row["round"]),
                _number(row["epsilon"]),
                f"{row['seconds']:.1f}",
                str(len(row["silos"])),
                *(_number(row[key]) if key in row else "-" for key in metrics),
            ]
            for row in self.rows
        ]
        widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
        return "\n".join(
            "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
            for cells in [header, *lines]
        )

    def summary(self) -> str:
        """Log the summary table (after the last round); returns it."""
        text = f"summary of {len(self.rows)} round(s):\n{self.table()}"
        say(logging.INFO, "%s", text)
        return text


_COLUMNS = ("round", "epsilon", "seconds", "silos")


def silo_data_repr(data: Any) -> str:
    """A :class:`~uldp.flower.SiloData` by its counts, never its ids or values (a repr reaches logs and tracebacks;
    a privacy officer signs off counts, not MRNs).

    >>> import numpy as np
    >>> from uldp.flower import SiloData
    >>> SiloData(np.zeros((5, 3)), np.zeros(5), ["MRN-1", "MRN-2", "MRN-1", "MRN-3", "MRN-3"])
    SiloData(records=5, features=3, patients=3)
    """
    import pandas as pd  # pandas counts ids of any hashable type, NaN apart; imported on use: a repr is rare

    shape = getattr(data.x, "shape", None)
    features = "x".join(str(int(n)) for n in shape[1:]) if shape is not None else "?"
    patients = pd.Series(list(data.patient_ids)).nunique()
    return f"{type(data).__name__}(records={len(data.patient_ids)}, features={features}, patients={patients})"


def strategy_repr(strategy: Any) -> str:
    """A :class:`~uldp.flower.UldpStrategy` by its settings: method, noise, sampling, delta, aggregation, silos."""
    hp = strategy.hp
    aggregation = (
        f"Protocol 1 ({strategy.protocol.key_bits}-bit key)"
        if strategy.secure and strategy.method.spec.enhanced_weights
        else "masked sum"
        if strategy.secure
        else "none"
    )
    silos = strategy.silos if strategy.silos is not None else "as they join"
    return (
        f"{type(strategy).__name__}(method={strategy.method.spec.name!r}, sigma={hp.sigma}, q={hp.q}, "
        f"delta={hp.delta}, clip={hp.clip}, secure_aggregation={aggregation!r}, silos={silos!r})"
    )


_TLS = re.compile(r"ssl|tls|handshake|certificate", re.IGNORECASE)


def connection_failure(error: Any) -> str:
    """Why a gRPC connection failed, in words an IT team acts on: a TLS failure as such (with gRPC's details and
    what to check), else gRPC's status code (``UNAVAILABLE``: nothing listens there).

    >>> class Refused:
    ...     def code(self): return type("Code", (), {"name": "UNAVAILABLE"})()
    ...     def details(self): return "failed to connect: Ssl handshake failed: CERTIFICATE_VERIFY_FAILED"
    >>> connection_failure(Refused()).split(":")[0]
    'TLS failed'
    """
    details = str(error.details()) if callable(getattr(error, "details", None)) else ""
    if _TLS.search(details):
        return (
            f"TLS failed: {details.strip()} (check --root-certificates against the server's CA, and that the "
            "server's certificate names this address)"
        )
    return error.code().name if callable(getattr(error, "code", None)) else type(error).__name__
