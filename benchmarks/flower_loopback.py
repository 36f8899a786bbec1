"""A deployed Flower round on loopback against the same round in process (issue 33's bound), from the files of
``examples/hospitals`` (its app, its pyproject, its launcher: they are what runs here, so they cannot rot).

In one run, on the same synthetic hospital files (``launch.demo_data``, ``--hospitals`` of them) and the example's
strategy (``hospital_app.make_strategy``: ULDP-AVG-w; by default plain aggregation so that a round is one message
per silo; ``--backend B``: secure aggregation with backend B, Protocol 1's set-up and one more exchange per round):

- ``in process``: the example's ClientApp and strategy on :class:`uldp.flower.LocalGrid` (no processes);
- ``deployed``: the example's launcher -- a SuperLink, per hospital a SuperNode with ``--isolation process`` and
  its long-lived ClientApp process (``uldp flower-worker``), the app submitted by ``uldp flower-run``;
- ``deployed, subprocess isolation`` (``--baseline-rounds``, 0 to skip): Flower's default, a new ClientApp process
  per message, the naive way.

Each round's seconds are the strategy's own (``round_seconds``: sending the model to the new model); the median
over the rounds is compared. The bound is 3 times the in-process median plus Flower's polling interval, read from
Flower's source: the SuperNode asks its SuperLink for a message every that many seconds while idle, so a deployed
round waits up to that long before any silo sees it. Also counted: how often each worker read its hospital's
records (once per run when the silo's data stay alive between messages) and how many ClientApp tasks it ran.

Both paths start from one saved model (the app's ``initial``) and every silo draws its noise from its own node
config's test seed (``uldp-insecure-reproducible-noise``), so the deployed model is compared with the in-process
one: at q = 1 every patient trains and they differ only by float32 summation order and the protocol's resolution P
(Theorem 4). The in-process run also weighs every message
as Flower 1.41 moves it: a message is a tree of objects (``flwr.supercore.inflatable``), each sent in a request of
its own (an ArrayRecord's arrays cut into chunks of ``FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE``, a ConfigRecord whole), so
the largest object is the largest request; the bytes each silo receives and sends in the set-up and in each round
are summed over its messages. Flower's size limits are read from the installed ``flwr`` (:func:`flower_limits`) and
the SuperLink's log says which transport carried the deployed run. With ``--backend lattice`` at q = 1, round 1
carries the packed BFV weights of a new sample and every later round holds the same sample (no weights sent).

Usage: PYTHONPATH=. python benchmarks/flower_loopback.py [--rounds 5] [--baseline-rounds 2] [--backend none]
       [--hospitals 4] [--patients 300] [--keep DIR] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import uldp.flower as uf
from uldp.common.checks import check_integer, check_rate
from uldp.flower.messages import INSECURE_NOISE_KEY, config_of
from uldp.secure.cost import BACKENDS, NONE

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hospitals"
SIGMA = 5.0
#: Every silo's own test seed (its node config, both paths), so that the two models can be compared.
NOISE_SEED = 5
#: The comparison's tolerance: float32 summation order (the union numbers the patients afresh in each run) and, with
#: secure aggregation, the protocol's resolution P (Theorem 4), far below it.
RTOL, ATOL = 1e-5, 1e-6


def run_config(backend: str, q: float, silos: list[str], initial: Path) -> dict[str, Any]:
    """The example's run configuration for ``backend`` (``"none"``: plain), both paths starting from the model
    saved at ``initial`` (each process would draw its own)."""
    return {
        "sigma": SIGMA,
        "q": q,
        "secure": backend != NONE,
        "backends": ", ".join(BACKENDS) if backend == NONE else backend,
        "silos": ", ".join(silos),
        "initial": initial,
    }


def polling_interval() -> float:
    """The seconds a SuperNode sleeps between two requests for a message while it has none (Flower's source)."""
    from flwr.supernode import start_client_internal

    source = inspect.getsource(start_client_internal.start_client_internal)
    found = re.search(
        r"If no message was received, wait for a while\s+time\.sleep\(([\d.]+)\)", source
    )
    if found is None:
        raise RuntimeError(
            "Flower's SuperNode polling interval is no longer where this benchmark reads it "
            "(flwr.supernode.start_client_internal): read it again"
        )
    return float(found.group(1))


def flower_limits() -> dict[str, Any]:
    """The size limits of the installed Flower, each with the file of ``flwr`` that sets it.

    In Flower 1.41 the SuperLink serves its Fleet, Runtime (ServerApp) and Control APIs over HTTP (one uvicorn app,
    ``flwr/superlink/cli/flower_superlink.py``; its gRPC Fleet API only under ``FLWR_INTERNAL_GRPC_FLEET_API=1``),
    as the SuperNode serves its ClientApp; those routes read a request's body whole with no size check
    (``flwr/supercore/protobuf/translation.py``). The gRPC limit below binds Flower's gRPC servers and channels.
    """
    import flwr
    from flwr.common import constant
    from flwr.supercore import grpc as flower_grpc
    from flwr.supercore.protobuf import client

    def where(module: Any) -> str:
        return str(
            Path(inspect.getfile(module)).relative_to(Path(inspect.getfile(flwr)).parents[1])
        )

    timeout = inspect.signature(client.ProtobufClient).parameters["timeout"].default
    return {
        "flwr": flwr.__version__,
        "grpc_max_message_length_bytes": flower_grpc.GRPC_MAX_MESSAGE_LENGTH,
        "grpc_max_message_length_source": f"{where(flower_grpc)} (GRPC_MAX_MESSAGE_LENGTH: every gRPC "
        "server and channel of Flower, send and receive)",
        "array_chunk_bytes": constant.FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE,
        "array_chunk_source": f"{where(constant)} (FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE: an Array is sent in "
        "chunks of at most this; a ConfigRecord is one object)",
        "http_client_timeout_seconds": timeout,
        "http_client_timeout_source": f"{where(client)} (ProtobufClient: httpx's limit on each of connecting, "
        "reading, writing and waiting for a connection, not on a whole request)",
    }


def transport(superlink_log: str) -> str:
    """The Fleet API's transport as the SuperLink's log states it (``HTTP`` in Flower 1.41, gRPC in older ones)."""
    found = re.search(r"Fleet (HTTP API|API \(gRPC-[a-z]+\))", superlink_log)
    return found.group(1) if found else "not stated in the SuperLink's log"


class WeighingGrid(uf.LocalGrid):
    """A :class:`uldp.flower.LocalGrid` that weighs every message and its reply as Flower's transport sends them:
    the bytes of each object of the message's tree (``deflate``), one request each."""

    def __init__(self, app: Any, node_configs: list[dict]) -> None:
        super().__init__(app, node_configs)
        self.weighed: list[dict[str, Any]] = []

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
        from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

        messages = list(messages)
        replies = list(super().send_and_receive(messages, timeout=timeout))
        for message, reply in zip(messages, replies, strict=True):
            settings = config_of(message)
            if message.metadata.message_type == "train":
                phase, stage = f"round {message.metadata.group_id}", "train"
            else:
                round_index, stage = int(settings.get("round", 0)), str(settings["stage"])
                phase = f"round {round_index}" if round_index > 0 else "set-up"
            for direction, weighed in (("received", message), ("sent", reply)):
                sizes = [len(o.deflate()) for o in get_all_nested_objects(weighed).values()]
                self.weighed.append(
                    {
                        "phase": phase,
                        "stage": stage,
                        "silo": message.metadata.dst_node_id,
                        "direction": direction,
                        "bytes": sum(sizes),
                        "largest_object_bytes": max(sizes),
                    }
                )
        return replies


def traffic(weighed: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase (the set-up, each round), the most bytes any one silo received and sent, and the largest object
    (one request) of the whole run with where it travelled."""
    totals: dict[tuple[str, str, int], int] = {}
    for row in weighed:
        key = (row["phase"], row["direction"], row["silo"])
        totals[key] = totals.get(key, 0) + row["bytes"]
    largest = max(weighed, key=lambda row: row["largest_object_bytes"])
    return {
        "per_silo": {
            phase: {
                f"{direction}_bytes": max(
                    total for (p, d, _), total in totals.items() if (p, d) == (phase, direction)
                )
                for direction in ("received", "sent")
            }
            for phase in dict.fromkeys(row["phase"] for row in weighed)
        },
        "largest_object": {
            key: largest[key] for key in ("largest_object_bytes", "phase", "stage", "direction")
        },
        "largest_message_bytes": max(row["bytes"] for row in weighed),
    }


def node_configs(data: Path) -> list[dict[str, Any]]:
    """What each hospital's SuperNode is given (``launch.Processes.hospital``), with its own test seed."""
    return [
        {
            "silo": file.stem,
            "data": str(file),
            "uldp-key-file": str(data / "key"),
            INSECURE_NOISE_KEY: NOISE_SEED,
        }
        for file in sorted(data.glob("*.csv"))
    ]


def flat(state: dict) -> np.ndarray:
    """A model's state_dict as one vector."""
    return np.concatenate([value.detach().numpy().ravel() for value in state.values()])


def in_process(data: Path, rounds: int, config: dict[str, Any]) -> dict[str, Any]:
    """The example's ClientApp and strategy on a weighing LocalGrid, from the initial model both paths start from
    (``config["initial"]``): each round's seconds, the set-up's, the model, and the traffic."""
    import hospital_app  # type: ignore[import-not-found]
    import torch

    grid = WeighingGrid(hospital_app.client, node_configs(data))
    strategy = hospital_app.make_strategy(config)
    result = strategy.start(grid, torch.load(config["initial"]), num_rounds=rounds)
    return {
        "round_seconds": [round(seconds, 3) for seconds in strategy.round_seconds],
        "setup_seconds": round(strategy.setup_seconds, 3),
        "model": flat(strategy.trained_model(result).state_dict()),
        "traffic": traffic(grid.weighed),
    }


def deployed(
    data: Path, work: Path, rounds: int, isolation: str, config: dict[str, Any]
) -> dict[str, Any]:
    """The example's launcher: each round's seconds, the set-up's, the run's wall time, the model, the transport,
    and what the workers did."""
    import launch  # type: ignore[import-not-found]
    import torch

    with contextlib.redirect_stdout(
        sys.stderr
    ):  # the launcher streams the ServerApp's log; stdout is the JSON's
        report = launch.run(
            data,
            work,
            rounds=rounds,
            isolation=isolation,
            sigma=config["sigma"],
            q=config["q"],
            secure=config["secure"],
            backends=config["backends"],
            initial=config["initial"],
            node_config=f"{INSECURE_NOISE_KEY}={NOISE_SEED}",
        )
    result: dict[str, Any] = {
        "round_seconds": [round(s, 3) for s in report["round_seconds"]],
        "median_round_seconds": round(statistics.median(report["round_seconds"]), 3),
        "setup_seconds": round(report["setup_seconds"], 3),
        "run_wall_seconds": round(report["wall_seconds"], 1),
        "fleet_transport": transport((work / "superlink.log").read_text()),
        "model": flat(torch.load(report["model"])),
    }
    if isolation == "process":
        logs = {
            path.stem.removeprefix("worker-"): path.read_text()
            for path in sorted(work.glob("worker-*.log"))
        }
        result["records_read_per_hospital"] = {
            name: log.count("read its records") for name, log in logs.items()
        }
        result["messages_per_worker"] = {
            name: len(re.findall(r"\) completed in", log)) for name, log in logs.items()
        }
    return result


def compared(deployed_model: np.ndarray, inside_model: np.ndarray) -> dict[str, Any]:
    """The deployed model against the in-process one."""
    return {
        "max_abs_difference": float(np.max(np.abs(deployed_model - inside_model))),
        "rtol": RTOL,
        "atol": ATOL,
        "equal_within_tolerance": bool(
            np.allclose(deployed_model, inside_model, rtol=RTOL, atol=ATOL)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds in process and deployed (default 5)"
    )
    parser.add_argument(
        "--baseline-rounds",
        type=int,
        default=2,
        help="rounds under subprocess isolation, the naive way (default 2; 0 skips it)",
    )
    parser.add_argument(
        "--backend",
        choices=[NONE, *BACKENDS],
        default=NONE,
        help="secure aggregation's backend (default none: plain aggregation)",
    )
    parser.add_argument("--hospitals", type=int, default=4, help="hospitals (default 4)")
    parser.add_argument(
        "--patients", type=int, default=300, help="patients across the hospitals (default 300)"
    )
    parser.add_argument(
        "--q", type=float, default=1.0, help="user sampling rate (default 1: every patient)"
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the processes' logs in a new folder under this one"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    try:  # the library's own checks, before any process starts or any file is written
        check_integer("--hospitals", args.hospitals, minimum=2)
        check_integer("--patients", args.patients, minimum=args.hospitals)
        check_rate("--q", args.q)
    except ValueError as error:
        parser.error(str(error))
    sys.path.insert(0, str(EXAMPLE))
    import launch

    os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
    root = Path(tempfile.mkdtemp(prefix="uldp-flower-loopback-", dir=args.keep))
    started = time.perf_counter()
    (root / "data").mkdir()
    data = launch.demo_data(root / "data", hospitals=args.hospitals, patients=args.patients)
    files = sorted(data.glob("*.csv"))
    import hospital_app
    import torch

    torch.save(hospital_app.model().state_dict(), root / "initial.pt")
    config = run_config(args.backend, args.q, [file.stem for file in files], root / "initial.pt")
    load_before = os.getloadavg()
    inside = in_process(data, args.rounds, config)
    inside_median = statistics.median(inside["round_seconds"])
    poll = polling_interval()
    worker = deployed(data, root / "process", args.rounds, "process", config)
    naive = (
        deployed(data, root / "subprocess", args.baseline_rounds, "subprocess", config)
        if args.baseline_rounds
        else None
    )
    bound = 3 * inside_median + poll
    limits = flower_limits()
    largest = inside["traffic"]["largest_object"]["largest_object_bytes"]
    document = {
        "federation": {
            "hospitals": len(files),
            "patients": args.patients,
            "records": sum(len(f.read_text().splitlines()) - 1 for f in files),
            "features": len(launch.FEATURES),
            "model": "MLP 30-32-32-1 (examples/hospitals)",
            "parameters": int(inside["model"].size),
            "method": "ULDP-AVG-w",
            **{key: config[key] for key in ("sigma", "q", "secure")},
            "backend": args.backend,
            "rounds": args.rounds,
        },
        "in_process": {
            "round_seconds": inside["round_seconds"],
            "median_round_seconds": round(inside_median, 3),
            "setup_seconds": inside["setup_seconds"],
            "traffic": inside["traffic"],
        },
        "deployed_process_isolation": {k: v for k, v in worker.items() if k != "model"},
        "deployed_subprocess_isolation": (
            {k: v for k, v in naive.items() if k != "model"} if naive else None
        ),
        "deployed_equals_in_process": compared(worker["model"], inside["model"]),
        "flower_limits": limits,
        "largest_object_over_grpc_limit": largest / limits["grpc_max_message_length_bytes"],
        "flower_polling_interval_seconds": poll,
        "bound_seconds": round(bound, 3),
        "ratio_deployed_to_in_process": round(worker["median_round_seconds"] / inside_median, 2),
        "ratio_bound_to_in_process": round(bound / inside_median, 2),
        "meets_bound": worker["median_round_seconds"] <= bound,
        "speedup_over_subprocess_isolation": (
            round(naive["median_round_seconds"] / worker["median_round_seconds"], 1)
            if naive
            else None
        ),
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average_1_5_15_before": [round(v, 2) for v in load_before],
            "load_average_1_5_15_after": [round(v, 2) for v in os.getloadavg()],
            "note": "2 cores shared with other work while this ran (loaded): the medians over rounds are "
            "compared, and both paths ran in the same run",
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(document))
    else:
        print(
            f"in process: set-up {inside['setup_seconds']:.2f} s, median round {inside_median:.2f} s "
            f"{inside['round_seconds']}"
        )
        print(
            f"deployed (--isolation process, uldp flower-worker, Fleet {worker['fleet_transport']}): set-up "
            f"{worker['setup_seconds']:.2f} s, median round {worker['median_round_seconds']:.2f} s "
            f"{worker['round_seconds']}; records read per hospital {worker['records_read_per_hospital']}"
        )
        if naive:
            print(
                f"deployed (subprocess isolation): median round {naive['median_round_seconds']:.2f} s "
                f"{naive['round_seconds']}"
            )
        print(
            f"ratio {document['ratio_deployed_to_in_process']} x in process; bound 3 x {inside_median:.2f} + "
            f"{poll:g} = {bound:.2f} s ({document['ratio_bound_to_in_process']} x): "
            f"{'met' if document['meets_bound'] else 'NOT met'}"
        )
        print(f"deployed model against in process: {document['deployed_equals_in_process']}")
        print(
            f"largest object {largest} bytes ({inside['traffic']['largest_object']}); per silo "
            f"{inside['traffic']['per_silo']}; Flower's limits {limits}"
        )


if __name__ == "__main__":
    main()
