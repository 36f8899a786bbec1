"""A silo's ledger (:class:`SiloLedger`): the persistent record of the rounds it answered and the noise it released,
which enforces its policy's budget and answers each round index once (see :mod:`uldp.policy`).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from uldp.accounting import PrivacySpent, epsilon_of_releases
from uldp.common.atomic import write_json_atomic
from uldp.common.checks import check_integer, check_number, check_positive
from uldp.policy.rules import PolicyRefusal, SiloPolicy, _within

LOGGER = logging.getLogger("uldp.policy")
_LEDGER_VERSION = 1
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
            colluders=self.policy.colluders,
        )
        if not groups:
            return spent
        epsilon = epsilon_of_group_releases(groups, delta=delta) + (
            spent.epsilon if releases else 0.0
        )
        return PrivacySpent(
            epsilon=epsilon,
            order=math.nan,
            delta=self.policy.delta,
            colluders=self.policy.colluders,
        )

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
            "answering round %d of run %s: user-level epsilon spent %.4g of %g, against %s",
            round_index,
            run[:12],
            spent.epsilon,
            self.policy.epsilon,
            self.policy.against,
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
