"""The rounds of every in-process run, :func:`uldp.fit` and :func:`uldp.simulation.run` alike: the run's random
streams, the method prepared on a federation (sigma calibrated to a target epsilon), and the round loop."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from uldp.accounting import epsilon_for_method, sigma_for_epsilon
from uldp.accounting.methods import SIGMA_RANGE
from uldp.common.atomic import check_writable
from uldp.common.checks import check_integer, check_number, renamed_keyword
from uldp.common.persist import Checkpoint, load_checkpoint, save_checkpoint
from uldp.defaults import SIGMA
from uldp.methods import make_method
from uldp.methods.base import seed_stream

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import numpy as np
    from torch import Tensor

    from uldp.methods.base import AggregateFn, Federation, Hyperparameters, Method, SumFn

#: Top-level random streams of a run, children of its root seed: the subset of the training records, the
#: allocation and the initial model (:func:`uldp.simulation.run`), the method's preparation and the rounds (both),
#: and :func:`uldp.fit`'s look at the norms the clipping bound meets (:mod:`uldp.fitting.clipping`).
ALLOCATION_STREAM, INIT_STREAM, PREPARE_STREAM, ROUNDS_STREAM, SUBSET_STREAM, CLIP_ADVICE_STREAM = (
    range(6)
)


def round_seed(root: np.random.SeedSequence, t: int) -> np.random.SeedSequence:
    """The random stream of round ``t`` of the run seeded by ``root``; rounds count from 0 here, so the server's
    round ``r`` (1-based, as Flower and the deployment number them) is ``round_seed(root, r - 1)``.

    Every draw of a round (user sampling, record order, dropout, noise) derives from this stream
    (:mod:`uldp.methods.base`'s sub-streams), so a round's draws depend on ``root`` and ``t`` alone.

    Raises:
        ValueError: ``t`` is not an integer >= 0.

    Example:
        >>> import numpy as np
        >>> root = np.random.SeedSequence(7)
        >>> round_seed(root, 2).spawn_key == (ROUNDS_STREAM, 2)
        True
    """
    return seed_stream(root, ROUNDS_STREAM, check_integer("t", t, minimum=0))


@renamed_keyword("target_epsilon", "epsilon")
def prepare_method(
    name: str,
    hp: Hyperparameters,
    federation: Federation,
    root: np.random.SeedSequence,
    *,
    user_weights: np.ndarray | None = None,
    epsilon: float | None = None,
    rounds: int = 1,
    accountant: str = "rdp",
    record_level: bool = False,
) -> tuple[Hyperparameters, Method, Federation]:
    """The method of the registry, prepared on ``federation`` (ULDP-GROUP-k's flags, from ``PREPARE_STREAM``).

    With ``epsilon``, ``hp.sigma`` is ignored: sigma becomes the smallest whose user-level epsilon after
    ``rounds`` rounds (by ``accountant``) is at most ``epsilon`` (:func:`uldp.accounting.sigma_for_epsilon`
    on the prepared federation: ULDP-GROUP-k's silo sizes are known only then; preparing reads no sigma).

    Args:
        name: A registry name (:func:`uldp.methods.make_method`).
        hp: The hyperparameters (``sigma`` may be ``None`` with ``epsilon``).
        federation: The records, allocation and model.
        root: The run's root seed.
        user_weights: Fixed ULDP-SGD/AVG weights ``[S][U]``, or ``None``.
        epsilon: A target epsilon to calibrate sigma to, or ``None``: ``hp.sigma`` as it is (its old name
            ``target_epsilon`` is accepted for one release, with a ``DeprecationWarning``).
        rounds: The rounds ``T`` of the target.
        accountant: ``"rdp"`` or ``"pld"`` (for ULDP-GROUP-k the mixture-of-Gaussians group accountant).
        record_level: ULDP-GROUP only: the target is record-level (DP-SGD's own guarantee, ``k = 1``).

    Returns:
        ``(hyperparameters with the sigma used, method, prepared federation)``.

    Raises:
        ValueError: Bad hyperparameters for the method, or a target no sigma reaches (saying why, before any
            training).
    """
    method = make_method(
        name, hp if epsilon is None else replace(hp, sigma=SIGMA), user_weights=user_weights
    )
    federation = method.prepare(federation, seed_stream(root, PREPARE_STREAM))
    if epsilon is not None:
        arguments = {
            **method.accounting_arguments(federation),
            **({"k": 1} if record_level else {}),
        }
        try:
            sigma = sigma_for_epsilon(
                name,
                epsilon=epsilon,
                rounds=rounds,
                delta=hp.delta,
                accountant=accountant,
                **arguments,
            )
        except ValueError as error:
            if "not reachable" not in str(error):
                raise
            raise ValueError(
                unreachable(
                    name,
                    epsilon,
                    rounds=rounds,
                    delta=hp.delta,
                    accountant=accountant,
                    arguments=arguments,
                )
            ) from error
        hp = replace(hp, sigma=sigma)
        method = make_method(name, hp, user_weights=user_weights)
    return hp, method, federation


def unreachable(
    name: str, epsilon: float, *, rounds: int, delta: float, accountant: str, arguments: dict
) -> str:
    """Why no noise multiplier reaches ``epsilon``: the epsilon at the largest sigma searched, and for ULDP-GROUP-k
    the group size ``k`` whose group privacy (Theorem 2) sets the floor."""
    sigma = SIGMA_RANGE[1]
    floor = epsilon_for_method(
        name, sigma=sigma, rounds=rounds, delta=delta, accountant=accountant, **arguments
    ).epsilon
    message = (
        f"{name} cannot reach epsilon={epsilon:g} at delta={delta:g} in {rounds} rounds: even sigma={sigma:g} "
        f"gives epsilon={floor:.4g}"
    )
    k = arguments.get("k")
    if k is not None and k > 1:
        message += (
            f". Its user-level guarantee is group privacy over the k={k} records it keeps per user, which "
            "grows with k; keep fewer records per user (ULDP-GROUP-<k> with a smaller k), or use "
            "ULDP-AVG-w, whose noise bounds a user's whole contribution whatever their number of records"
        )
    return message


# ------------------------------------------------------------------------------------------------ the rounds --
def restored_history(
    rows: Sequence[dict], method: Method, federation: Federation, *, accountant: str
) -> list[dict]:
    """The rows of a checkpoint, checked field by field, with each round's epsilon recomputed by the accountant.

    A checkpoint's digest detects corruption, not a forged file: the epsilon a resumed run reports is recomputed
    from the method, the federation and ``accountant`` (Theorems 1-3), never read from the file; a stored value
    that disagrees with the recomputation is refused, as is a row of another layout.

    Args:
        rows: The checkpoint's history (one dict per completed round, as :func:`train_rounds` writes them).
        method: The run's method, prepared on ``federation``.
        federation: The records.
        accountant: The run's accountant.

    Returns:
        The rows, with the recomputed epsilons.

    Raises:
        ValueError: A round number out of sequence, rows of different keys, a missing ``epsilon`` or ``seconds``,
            a value that is not a number, or an epsilon other than the accountant's.
    """
    checked: list[dict] = []
    for t, row in enumerate(rows):
        if not isinstance(row, dict) or type(row.get("round")) is not int or row["round"] != t + 1:
            raise ValueError(
                f"checkpoint row {t} must be an object with round {t + 1}, got {str(row)[:80]}"
            )
        if set(row) != set(rows[0]) or not {"epsilon", "seconds"} <= set(row):
            raise ValueError(
                f"checkpoint row {t} must hold epsilon, seconds and the keys of the first row "
                f"{sorted(rows[0])[:8]}, got {sorted(row)[:8]}"
            )
        for name, value in row.items():
            if name != "epsilon" and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise ValueError(
                    f"checkpoint round {t + 1}: {str(name)[:40]} must be a number, got {value!r:.40}"
                )
        check_number("seconds", row["seconds"], at_least=0, finite=True)
        spent = method.epsilon(federation, t + 1, accountant=accountant)
        epsilon = None if spent is None else float(spent)
        stored = row["epsilon"]
        if (epsilon is None) != (stored is None) or (
            epsilon is not None
            and not (type(stored) is float and math.isclose(stored, epsilon, rel_tol=1e-9))
        ):
            raise ValueError(
                f"checkpoint round {t + 1} says epsilon {stored!r:.40}; the method and the {accountant} "
                f"accountant give {epsilon!r}: the file was altered or belongs to another run"
            )
        checked.append({**row, "epsilon": epsilon})
    return checked


def train_rounds(
    method: Method,
    federation: Federation,
    params: Tensor,
    *,
    rounds: int,
    root: np.random.SeedSequence,
    evaluate: Callable[[Tensor], dict],
    aggregate_fn: AggregateFn | None = None,
    sum_fn: SumFn | None = None,
    checkpoint: str | Path | None = None,
    fingerprint: str = "",
    checkpoint_seconds: float = 60.0,
    progress: bool = False,
    description: str = "training",
    accountant: str = "rdp",
    epsilon_budget: float | None = None,
    checkpoint_option: str = "--checkpoint",
) -> tuple[Tensor, list[dict], int]:
    """The round loop of every in-process run: :func:`fit` and :func:`uldp.simulation.run` (one core).

    Round ``t`` (0-based) is ``method.round`` with the random stream :func:`round_seed` ``(root, t)``
    (Algorithms 1-4), then ``evaluate(params)`` and the method's accountant (Theorems 1-3) for epsilon after
    ``t + 1`` rounds. Each round's draws depend on ``root`` and ``t`` alone, so a run resumed from its checkpoint
    (:mod:`uldp.common.persist`'s atomic format) ends exactly as an uninterrupted one.

    Args:
        method: A method of :func:`uldp.methods.make_method`, prepared on ``federation``.
        federation: The records.
        params: The initial flat model.
        rounds: Rounds ``T`` in all (those of a resumed checkpoint included).
        root: The run's root seed.
        evaluate: ``params -> {name: float}`` after each round (its names go first in each row).
        aggregate_fn: The enhanced-weight aggregation hook (``None``: plain).
        sum_fn: The other methods' hook, the sum of the silos' updates (``None``: plain; not passed to the method's
            round then, so a registered method without it runs as before).
        checkpoint: File to resume from and save to, or ``None``.
        fingerprint: What a checkpoint must match (the run's configuration and data).
        checkpoint_seconds: Save at most this often, and always after the last round and on an interrupt
            (``KeyboardInterrupt``: Ctrl-C, or SIGTERM where the caller turns it into one), which keeps every
            round completed before it.
        progress: Show a tqdm bar on stderr.
        description: The bar's label.
        accountant: The accountant of each round's epsilon (``"rdp"`` or ``"pld"``).
        epsilon_budget: Stop before the first round whose epsilon would exceed it (``None``: no budget).
        checkpoint_option: How the caller names ``checkpoint`` in messages (``"--checkpoint"``, ``"checkpoint="``).

    Returns:
        ``(final params, rows, rounds resumed from the checkpoint)``; a row is ``{"round", **evaluate(params),
        "epsilon", "seconds"}``. Fewer rows than ``rounds`` means the budget stopped the run.

    Raises:
        ValueError: A corrupted checkpoint, one of another configuration, one with more rounds than ``rounds`` (its
            model has trained longer than asked), or one whose rows are not what this run writes
            (:func:`restored_history`).
    """
    if checkpoint is not None:
        check_writable(checkpoint, "checkpoint")  # before any training, not after it
    history: list[dict] = []
    restored = (
        None
        if checkpoint is None
        else load_checkpoint(
            checkpoint,
            config_fingerprint=fingerprint,
            like=params.detach().cpu().numpy(),
            option=checkpoint_option,
        )
    )
    if restored is not None and restored.rounds_done > rounds:
        raise ValueError(
            f"checkpoint {checkpoint} holds {restored.rounds_done} rounds, more than the {rounds} asked "
            f"(its model has trained longer and spent more budget); ask for rounds >= "
            f"{restored.rounds_done} or use another {checkpoint_option} path"
        )
    if restored is not None:
        params = torch.from_numpy(restored.params).to(params.device)
        history = restored_history(restored.history, method, federation, accountant=accountant)
    resumed = len(history)
    saved_rounds, saved = resumed, time.perf_counter()

    def save(path: str | Path, model: Tensor) -> None:
        """Save ``model``, the model after the last row of ``history``, to ``path``."""
        nonlocal saved_rounds, saved
        save_checkpoint(
            path,
            Checkpoint(
                rounds_done=len(history),
                params=model.detach().cpu().numpy().copy(),
                config_fingerprint=fingerprint,
                history=tuple(history),
            ),
        )
        saved_rounds, saved = len(history), time.perf_counter()

    # the model after the last row of history: within a round, ``params`` runs ahead of it
    completed = params
    federation.model.train()
    try:
        for t in tqdm(
            range(resumed, rounds),
            desc=description,
            disable=not progress,
            unit="round",
            initial=resumed,
            total=rounds,
        ):
            tick = time.perf_counter()
            epsilon = method.epsilon(
                federation, t + 1, accountant=accountant
            )  # known before the round is run
            if epsilon_budget is not None and epsilon is not None and epsilon > epsilon_budget:
                break
            seed = round_seed(root, t)
            if sum_fn is None:
                params = method.round(params, federation, seed, aggregate_fn)
            else:
                params = method.round(params, federation, seed, aggregate_fn, sum_fn=sum_fn)
            row = {"round": t + 1, **evaluate(params)}
            row.update(
                epsilon=None if epsilon is None else float(epsilon),
                seconds=round(time.perf_counter() - tick, 4),
            )
            history.append(row)
            completed = params
            if checkpoint is not None and (
                t + 1 == rounds or time.perf_counter() - saved >= checkpoint_seconds
            ):
                save(checkpoint, completed)
    except KeyboardInterrupt:
        # Ctrl-C, or SIGTERM as uldp grid and uldp run turn it into one: the rounds completed since the last save
        # are kept, so a run stopped by a time limit resumes where it stopped, not up to checkpoint_seconds earlier
        if checkpoint is not None and len(history) > saved_rounds:
            save(checkpoint, completed)
        raise
    return params, history, resumed
