"""uldp.fitting.rounds through uldp.fit: a method prepared for a target epsilon (met after the last round; an
unreachable target says why, for every private method), and the round loop's checkpoints: a run resumed from its
checkpoint continues exactly, one of another configuration is refused naming what differs, and so is a checkpoint
whose rows were rewritten and resealed, unless they are what the run writes."""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING

import pytest
import torch
from fitting_helpers import fit_arguments, mlp, records
from torch import nn

import uldp
from uldp.common.persist import MAGIC, Checkpoint, array_from_bytes, save_checkpoint
from uldp.fitting import fit

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.slow
def test_every_private_method_takes_epsilon_and_an_unreachable_target_says_why():
    x, y, users, silos = records()
    arguments = fit_arguments(users, silos, rounds=1, batch_size=8)
    _, history = fit(mlp(), x, y, method="ULDP-GROUP-2", epsilon=6.0, **arguments)
    assert history.epsilon is not None and history.epsilon == pytest.approx(6.0, rel=1e-3)
    assert history.epsilon <= 6.0 + 1e-9
    _, history = fit(mlp(), x, y, method="ULDP-GROUP-2", epsilon=6.0, accountant="pld", **arguments)
    assert history.epsilon == pytest.approx(6.0, rel=1e-2)
    with pytest.raises(
        ValueError, match=r"cannot reach epsilon=0.01.*k=\d+ records it keeps per user"
    ):
        fit(mlp(), x, y, method="ULDP-GROUP-max", epsilon=0.01, **{**arguments, "rounds": 50})


def test_a_target_epsilon_is_met_after_the_last_round():
    x, y, users, silos = records()
    _, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        epsilon=3.0,
        q=0.5,
        rounds=3,
        local_epochs=1,
        batch_size=16,
    )
    assert history.epsilon is not None and 3.0 * (1 - 1e-4) <= history.epsilon <= 3.0
    assert history.sigma == pytest.approx(
        uldp.accounting.sigma_for_epsilon("ULDP-AVG-w", epsilon=3.0, rounds=3, delta=1e-5, q=0.5)
    )


def test_a_run_resumed_from_its_checkpoint_continues_exactly(tmp_path, capsys):
    x, y, users, silos = records()
    arguments = fit_arguments(
        users,
        silos,
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
        seed=0,
    )
    whole, _ = fit(mlp(), x, y, rounds=4, **arguments)
    path = tmp_path / "fit.ckpt"
    fit(mlp(), x, y, rounds=2, checkpoint=path, **arguments)
    resumed, history = fit(mlp(), x, y, rounds=4, checkpoint=path, progress=True, **arguments)
    assert history.resumed_from == 2 and [r["round"] for r in history.rows] == [1, 2, 3, 4]
    torch.testing.assert_close(
        uldp.flat_parameters(resumed), uldp.flat_parameters(whole), rtol=0, atol=0
    )
    assert "4/4" in capsys.readouterr().err
    with pytest.raises(
        ValueError,
        match=r"another configuration \(these differ: clip, sigma\).*another checkpoint= "
        "path",
    ) as refused:
        fit(mlp(), x, y, rounds=4, checkpoint=path, **{**arguments, "sigma": 2.0, "clip": 0.5})
    assert "--checkpoint" not in str(refused.value)
    with pytest.raises(ValueError, match="these differ: user_ids"):
        fit(
            mlp(),
            x,
            y,
            rounds=4,
            checkpoint=path,
            **{**arguments, "user_ids": [u + "x" for u in users]},
        )
    with pytest.raises(ValueError, match="holds 4 rounds, more than the 2 asked"):
        fit(mlp(), x, y, rounds=2, checkpoint=path, **arguments)
    with pytest.raises(ValueError, match="does not exist"):
        fit(mlp(), x, y, rounds=2, checkpoint=tmp_path / "missing" / "fit.ckpt", **arguments)


def _reseal(path: Path, change) -> None:
    """The attack: rewrite a checkpoint's history and seal it again with a fresh digest (the digest is unkeyed)."""
    data = path.read_bytes()[:-32]
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + length])
    params = array_from_bytes(data[len(MAGIC) + 4 + length :])
    save_checkpoint(
        path,
        Checkpoint(
            header["rounds_done"],
            params,
            header["config_fingerprint"],
            tuple(change(header["history"])),
        ),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda rows: [{**row, "epsilon": 0.001} for row in rows], "round 1 says epsilon 0.001"),
        (lambda rows: [rows[0], {**rows[1], "epsilon": None}], "round 2 says epsilon None"),
        (lambda rows: [{"junk": 1}, {"junk": 2}], "row 0 must be an object with round 1"),
        (lambda rows: [rows[1], rows[0]], "row 0 must be an object with round 1"),
        (
            lambda rows: [
                rows[0],
                {key: value for key, value in rows[1].items() if key != "seconds"},
            ],
            "row 1 must hold",
        ),
        (lambda rows: [rows[0], {**rows[1], "seconds": -1.0}], "seconds must be"),
        (lambda rows: [rows[0], {**rows[1], "seconds": "fast"}], "seconds must be a number"),
    ],
)
def test_a_resealed_checkpoint_is_refused_unless_its_rows_are_what_the_run_writes(
    tmp_path, change, message
):
    x, y, users, silos = records()
    arguments = fit_arguments(
        users,
        silos,
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
        rounds=2,
        checkpoint=tmp_path / "fit.ckpt",
    )
    _, honest = fit(mlp(), x, y, **arguments)
    _reseal(tmp_path / "fit.ckpt", lambda rows: rows)
    assert (
        fit(mlp(), x, y, **arguments)[1].rows == honest.rows
    )  # resealed as it was: resumed as it was
    _reseal(tmp_path / "fit.ckpt", change)
    with pytest.raises(ValueError, match=message):
        fit(mlp(), x, y, **arguments)
