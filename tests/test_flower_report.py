"""uldp.flower.report: a failing silo's own words without Flower's wrapping, one line per round with the held-out
metrics, a summary table whose rows are the rounds' lines, set-up stages timed, and every line logged once."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from flower_hospitals import HOSPITALS, LAX, hospital_files, load, model, node_configs  # noqa: F401  (fixture)
from flwr.app import MetricRecord
from torch import nn

import uldp
import uldp.flower as uf
from uldp.accounting import epsilon_uldp
from uldp.flower import report
from uldp.flower.arrays import trained_model


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (  # a SuperNode's ClientApp process (flwr's run_clientapp and uldp flower-worker)
            "<class 'uldp.flower.client.SiloFailure'>:<'silo 'Hospital B' failed: KeyError: 'outcome''>",
            "silo 'Hospital B' failed: KeyError: 'outcome'",
        ),
        (  # LocalGrid
            "SiloFailure: silo 'St Mary' failed: ValueError: y must be numeric",
            "silo 'St Mary' failed: ValueError: y must be numeric",
        ),
        ("<class 'TimeoutError'>:<'no reply'>", None),
    ],
)
def test_a_silos_failure_is_read_out_of_flowers_error_reason(reason, said):
    assert report.silo_failure(reason) == said


def test_every_round_reports_its_epsilon_silos_and_held_out_metrics(hospital_files):  # noqa: F811
    from flwr.app import ArrayRecord

    rng = np.random.default_rng(1)
    x_test = torch.from_numpy(rng.normal(size=(40, 3)).astype(np.float32))
    y_test = (x_test[:, 0] > 0).long()

    def evaluate(round_index: int, arrays: ArrayRecord) -> MetricRecord:
        net = trained_model(arrays, model())
        with torch.no_grad():
            outputs = net(x_test)
        return MetricRecord(
            {
                "loss": float(nn.functional.cross_entropy(outputs, y_test)),
                "accuracy": float((outputs.argmax(1) == y_test).float().mean()),
            }
        )

    grid = uf.LocalGrid(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()), node_configs(hospital_files, LAX)
    )
    strategy = uf.UldpStrategy(method="ULDP-AVG", sigma=2.0, q=1.0, secure=False)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("uldp.flower")
    logging.getLogger().addHandler(
        handler
    )  # the application configured logging: each line once, through it
    old_level = logger.level
    logger.setLevel(
        logging.INFO
    )  # setLevel, not .level =: it clears the loggers' isEnabledFor cache
    try:
        result = strategy.start(
            grid,
            ArrayRecord([uldp.flat_parameters(model()).numpy()]),
            num_rounds=2,
            evaluate_fn=evaluate,
        )
    finally:
        logging.getLogger().removeHandler(handler)
        logger.setLevel(old_level)
    assert strategy.report is not None
    for row in (
        strategy.report.rows
    ):  # the accountant's epsilon after that many releases, that round's evaluation
        expected = epsilon_uldp(sigma=2.0, rounds=row["round"], delta=strategy.hp.delta).epsilon
        assert row["epsilon"] == pytest.approx(expected)
        assert row["silos"] == sorted(HOSPITALS)
        assert row["accuracy"] == result.evaluate_metrics_serverapp[row["round"]]["accuracy"]
    lines = stream.getvalue().splitlines()
    rounds = [line for line in lines if line.startswith("round ") and "(index " in line]
    assert len(rounds) == 2 and rounds[0].startswith("round 1/2 (index 1): epsilon "), lines
    assert all(
        f"3 silos ({', '.join(sorted(HOSPITALS))})" in line and "; test loss " in line
        for line in rounds
    )
    assert strategy.report is not None
    for line, row in zip(rounds, strategy.report.rows, strict=True):
        assert f"accuracy {row['accuracy']:.4g}" in line
        assert row["accuracy"] == result.evaluate_metrics_serverapp[row["round"]]["accuracy"]
    assert sum("the private set union" in line and "done in" in line for line in lines) == 1, lines
    summary = lines[lines.index("summary of 2 round(s):") :]
    assert summary[1].split() == ["round", "epsilon", "seconds", "silos", "accuracy", "loss"]
    assert [cells.split()[0] for cells in summary[2:4]] == ["1", "2"]
    assert len(lines) == len(set(lines))  # no line twice


@pytest.mark.parametrize("configured", [False, True])
def test_a_line_is_printed_once_whether_or_not_the_application_configured_logging(configured):
    """A ServerApp process configures nothing (the line goes through Flower's console handler); a script that
    called logging.basicConfig gets it once through its own handler (Flower's would add a second copy)."""
    program = (
        "import logging, flwr.common.logger\n"
        + ("logging.basicConfig(level=logging.INFO)\n" if configured else "")
        + "from uldp.flower import report\nreport.say(logging.INFO, 'round %d said once', 7)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert (done.stdout + done.stderr).count("round 7 said once") == 1, done


def test_reprs_show_counts_and_settings_never_a_patient_id():
    ids = [f"MRN-{n:05d}" for n in (7, 7, 9, 11, 9, 7)]
    text = repr(uf.SiloData(np.zeros((6, 4), np.float32), np.zeros(6), pd.Series(ids)))
    assert text == "SiloData(records=6, features=4, patients=3)"
    assert not any(mrn in text for mrn in ids)
    strategy = uf.UldpStrategy(method="ULDP-AVG-w", sigma=5.0, q=0.5, silos=["A", "B"])
    assert repr(strategy).startswith(
        "UldpStrategy(method='ULDP-AVG-w', sigma=5.0, q=0.5, delta=1e-05"
    )
    assert "Protocol 1 (3072-bit key)" in repr(strategy) and "at 0x" not in repr(strategy)


@pytest.mark.parametrize(
    ("details", "said"),
    [
        (
            "failed to connect to all addresses; last error: UNAVAILABLE: Connection refused",
            "UNAVAILABLE",
        ),
        (
            "Ssl handshake failed: SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED",
            "TLS failed: Ssl handshake",
        ),
    ],
)
def test_a_tls_failure_is_reported_as_such_not_as_a_missing_server(details, said):
    class Failed:
        def code(self):
            return type("Code", (), {"name": "UNAVAILABLE"})()

        def details(self):
            return details

    assert report.connection_failure(Failed()).startswith(said)


def test_a_line_still_shows_after_a_logging_config_disabled_the_existing_loggers():
    """alembic's fileConfig (Flower's state database, in process) disables every existing logger
    (``disable_existing_loggers``: it sets ``disabled`` on each); the round lines of uldp.flower must still reach the
    application's handler."""
    from uldp.flower import report

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("uldp.flower")
    logging.getLogger().addHandler(handler)
    old_level, was_disabled = logger.level, logger.disabled
    logger.setLevel(logging.INFO)
    logger.disabled = True  # what fileConfig does to a logger that exists (and nothing else here)
    try:
        report.say(logging.INFO, "round %d still said", 3)
    finally:
        logging.getLogger().removeHandler(handler)
        logger.setLevel(old_level)
        logger.disabled = was_disabled
    assert stream.getvalue().splitlines() == ["round 3 still said"]
