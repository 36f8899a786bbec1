# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Deploying across silos
#
# In the rest of the book the federation runs in one process. In practice each silo is a different institution:
# its records never leave its machine, and the server is a third party. `uldp deploy` runs the same methods
# (DEFAULT, ULDP-NAIVE, ULDP-GROUP-k, ULDP-SGD/AVG with enhanced weights and user sampling) as **one server and one
# process per silo**, on [Flower](https://flower.ai)'s runtime (Flower 1.41, no Ray, telemetry off with
# `FLWR_TELEMETRY_ENABLED=0`): the server runs a SuperLink and the uldp ServerApp, each silo a SuperNode and the uldp
# ClientApp. They are the strategy and ClientApp of `uldp.flower` (`UldpStrategy`), which a hospital with its own
# model and loading code runs as its own Flower app; `uldp deploy` drives them from one settings file.
#
# **Who computes what.** Every party reads the same settings file and derives from its seed what every party may
# know: the allocation, ULDP-GROUP-k's flags and the initial model. A silo loads the dataset, derives the allocation
# and keeps only its own records (or, for a hospital, reads its own table): it trains on those alone and sends the
# method's silo update ($\Delta_s + z_s$ for ULDP-NAIVE, a DP-SGD delta for ULDP-GROUP-k,
# $\sum_u w_{su}\Delta_{su} + z_s$ for ULDP-SGD/AVG). The server holds the global model, samples the users
# ({ref}`Algorithm 4 <paper-algorithm-4>`), sums the updates, applies the server step, evaluates the model and runs
# the accountant. Aggregation is secure by default for every method (`"secure": false` opts out, and the run then
# reports the $\epsilon$ of the server's view): under ULDP-AVG-w and ULDP-SGD-w the silo's clipped per-user deltas
# and noise only ever leave it inside {ref}`Protocol 1 <paper-protocol-1>`'s masked update; under the other methods
# its update leaves it under {ref}`Protocol 1 <paper-protocol-1>`'s pairwise masks alone (`uldp.secure.masked_sum`).
# Either way the server learns the noisy sum over the silos alone, never one silo's update, and cannot remove its
# noise.
#
# **Who knows which random draw.** The server is the adversary of the paper's trust model (semi-honest,
# {ref}`Section 3.1 <paper-section-3-1>`), and it holds the settings file, seed included. A draw whose secrecy the
# privacy argument needs must therefore never come from that seed: if a silo's noise $z_s$ did, the server could
# rebuild it with its own objects and subtract it, leaving the noise-free update (an earlier version did exactly
# that; `tests/test_flower_client.py` runs that attack against every silo). Every random draw of a deployed round:
#
# | draw | drawn by | from | who may know it |
# |---|---|---|---|
# | allocation, initial model, ULDP-GROUP-k flags $\mathbf{B}$ | every party | the shared `seed` | everyone (public) |
# | users sampled in round $t$ ({ref}`Algorithm 4 <paper-algorithm-4>`) | server | the server's own secret (OS CSPRNG) | the server; the silos receive it |
# | noise $z_s$ (ULDP-NAIVE, ULDP-SGD/AVG), DP-SGD sampling and noise (ULDP-GROUP-k), batch order, dropout | silo $s$ | silo $s$'s own secret (OS CSPRNG) | silo $s$ only |
# | Paillier key pair ({ref}`Protocol 1 <paper-protocol-1>` step 1(a)) | server | OS CSPRNG | public key: everyone |
# | X25519 key pair of silo $s$ (step 1(b)) | silo $s$ | OS CSPRNG | public key: everyone |
# | seed $R$ (step 1(c)), hence blinds and masks | silo 0 | `os.urandom` | the silos, never the server |
# | AEAD nonces, Paillier randomizers | their sender | OS CSPRNG | public |
#
# The silos learn which users were sampled, because they train only those; the paper's trust model lets only the
# server know it ({ref}`Section 3.1 <paper-section-3-1>`). Beyond the paper, the silos can draw the sample themselves
# and hide it from the server (`"hidden_sample": true`, README). The settings field `"insecure_reproducible_noise":
# true` brings back the shared-seed draws so that a deployed run equals the in-process one draw for draw: **it voids
# the privacy guarantee** (the server can strip every silo's noise). It exists for the tests only. The in-process
# simulation (`uldp.simulation.run`) is always seeded: it models the computation, not the trust boundary.
#
# **Which Flower runtime.** Flower 1.41's *Deployment Engine*: one SuperLink (`flower-superlink`) on one port, one
# SuperNode per silo (`flower-supernode`), the run submitted with `flwr run`. {ref}`Protocol 1 <paper-protocol-1>`
# needs several exchanges to set up and two per round, and each silo keeps secrets (its X25519 key, pairwise keys,
# blinds) from one stage to the next: they live in the SuperNode's node-local state, as bytes in explicit formats,
# and never reach the SuperLink. Each SuperNode runs with `--isolation process` and one long-lived ClientApp process
# (`uldp flower-worker`), so a silo reads its records once per run, not once per message.
#
# **What travels.** Every stage is one Flower message to each silo, answered by one message. Model vectors, sampled
# users and {ref}`Protocol 1 <paper-protocol-1>`'s messages ride as bytes in explicit formats
# (`uldp.common.persist`: dtype, shape, data and a SHA-256 digest; `uldp.secure.messages` for the protocol).
# Nothing is pickled.
#
# **Faults.** The strategy accounts each round before it asks it, and a round that a silo failed counts as a release:
# it is never asked again. The checkpoint (`--checkpoint`, written atomically before and after every round) holds the
# model and every release; a resubmitted run resumes from it at the next round index, and a silo that comes back
# under a new node id is taken back by its name. A silo the run does not name is left out, and a SuperNode whose key
# the server did not register is refused by the SuperLink.
#
# ## The commands
#
# Every party gets the same settings file: the fields of `uldp.simulation.RunConfig` (unset ones take the paper's
# values), plus optionally {ref}`Protocol 1 <paper-protocol-1>`'s public parameters, or a hospital table's columns
# (README, "`uldp deploy`"). For example `run.json`:
#
# ```json
# {"dataset": "creditcard", "method": "ULDP-AVG-w", "n_users": 100, "n_silos": 3, "rounds": 10, "seed": 0,
#  "q": 0.5, "secure": true, "protocol": {"key_bits": 3072, "n_max": 2000}}
# ```
#
# `uldp deploy keys` writes the silos' relay key (the silos seal what they send each other through the server under
# it; never given to the server) and one SuperNode key pair per silo, whose public halves the server registers:
#
# ```text
# uldp deploy keys --silos 3 --out keys/
# uldp deploy server --config run.json --address 0.0.0.0:9092 --silos silo-0,silo-1,silo-2 --checkpoint strategy.ckpt \
#     --ssl-ca-certfile ca.crt --ssl-certfile server.crt --ssl-keyfile server.key \
#     --supernode-key keys/supernode-0.pub --supernode-key keys/supernode-1.pub --supernode-key keys/supernode-2.pub
# uldp deploy silo --config run.json --server server.example.org:9092 --silo-id 0 --relay-key keys/relay.key \
#     --auth-key keys/supernode-0 --root-certificates ca.crt
# ```
#
# This page runs the same commands on one machine, over loopback without TLS (TLS and SuperNode authentication add a
# handshake per connection, not per round; `tests/test_deploy_flower.py` runs them with both). A short run on the
# `synthetic` dataset makes a dress rehearsal of machines, certificates and keys.

# %% tags=["parameters"]
profile = "default"

# %%
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from uldp.deploy.config import DeployConfig
from uldp.federation import SecureAggregator
from uldp.paper.chapters import show_captioned
from uldp.paper.plots import figure_legend
from uldp.simulation import run

os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
SIZES = {
    # two rounds, the least that shows round 2 on: a round on Flower costs at least the SuperNodes' polling (every
    # 3 s, twice a round under Protocol 1), and the set-up waits for the silos' SuperNodes to start
    "smoke": dict(
        n_users=20,
        rounds=2,
        local_epochs=1,
        max_train_records=200,
        protocol={"key_bits": 512, "n_max": 40, "insecure_test_key": True},
        psu_group="insecure-test-256",  # the union's test group, as short as the test keys
    ),
    # as small, on more records and with 1024-bit test keys: Flower's message rounds, not the keys, set the page's
    # time (2.6 min on a loaded 2-core machine, 2.1 at smoke); the paper profile has the paper's keys
    "default": dict(
        n_users=20,
        rounds=2,
        local_epochs=1,
        max_train_records=400,
        protocol={"key_bits": 1024, "n_max": 100, "insecure_test_key": True},
        psu_group="insecure-test-256",
    ),
    "paper": dict(
        n_users=100,
        rounds=5,
        local_epochs=2,
        max_train_records=None,
        protocol={"key_bits": 3072, "n_max": 2000},
    ),
}
RUN = {
    "dataset": "creditcard",
    "method": "ULDP-AVG-w",
    "n_silos": 3,
    "seed": 0,
    "q": 1.0,
    "secure": True,
    **SIZES[profile],
}
config = DeployConfig.from_json(RUN)
paper_size = SIZES["paper"]
display(
    Markdown(
        f"At the **{profile}** profile this page deploys a federation of {config.run.n_users} users in "
        f"{config.run.n_silos} silos for {config.run.rounds} rounds of {config.run.local_epochs} local epoch(s), "
        + (
            f"on {config.run.max_train_records:,} training records"
            if config.run.max_train_records
            else "on every training record"
        )
        + f", with {config.protocol.key_bits}-bit keys and the private set union in the {config.psu_group} group"
        + (
            " (test keys and group, too short for a real federation)"
            if config.protocol.insecure_test_key
            else ""
        )
        + (
            ""
            if profile == "paper"
            else f": a small federation, so that the page builds in minutes (the paper profile runs "
            f"{paper_size['n_users']} users for {paper_size['rounds']} rounds on every record with "
            f"{paper_size['protocol']['key_bits']}-bit keys and the union's default group). Its run:"
        )
    ),
    pd.DataFrame(
        [
            ("dataset", config.run.dataset),
            ("method", config.run.method),
            ("silos", config.run.n_silos),
            ("users", config.run.n_users),
            ("rounds", config.run.rounds),
            ("local epochs", config.run.local_epochs),
            ("user sampling rate q", config.run.q),
            ("Protocol 1 (secure aggregation)", "yes" if config.run.secure else "no"),
            ("key size (bits)", config.protocol.key_bits),
            ("private set union's group", config.psu_group),
            ("seed (allocation and initial model)", config.run.seed),
        ],
        columns=["setting", "value"],
    ).style.hide(axis="index"),
)

# %% [markdown]
# ## One federation on this machine
#
# A server and three silos on localhost, each started with the command above (`--quiet`: their logs stay out of the
# page). The server's `--json` result holds each round's line: its seconds, the test metrics and the user-level
# $\varepsilon$ spent so far.


# %%
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the command's own session: it stops the SuperNode and worker it started, then exits."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def deploy(data: dict, workdir: Path) -> tuple[dict, float]:
    """``uldp deploy keys``, then ``uldp deploy server`` and one ``uldp deploy silo`` per silo as processes on
    loopback: (the server's JSON result, wall seconds)."""
    path, keys = workdir / "run.json", workdir / "keys"
    path.write_text(json.dumps(data))
    command = [sys.executable, "-m", "uldp.deploy.cli"]
    subprocess.run(
        [*command, "keys", "--silos", str(config.run.n_silos), "--out", str(keys)],
        check=True,
        capture_output=True,
    )
    port, names = free_port(), [f"silo-{s}" for s in range(config.run.n_silos)]
    start = time.perf_counter()
    server = subprocess.Popen(
        [
            *(*command, "server", "--config", str(path), "--address", f"127.0.0.1:{port}"),
            *(
                "--silos",
                ",".join(names),
                "--work",
                str(workdir / "server"),
                "--join-timeout",
                "300",
            ),
            *("--checkpoint", str(workdir / "strategy.ckpt"), "--json", "--quiet"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    silos = [
        subprocess.Popen(
            [
                *(*command, "silo", "--config", str(path), "--server", f"127.0.0.1:{port}"),
                *("--silo-id", str(s), "--relay-key", str(keys / "relay.key"), "--max-wait", "300"),
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for s in range(config.run.n_silos)
    ]
    try:
        output, log = server.communicate(timeout=3600)
    finally:
        for process in [server, *silos]:
            stop(process)
    if server.returncode != 0:
        raise RuntimeError(
            f"the server exited with status {server.returncode}; its log:\n{log[-3000:]}"
        )
    return json.loads(output), time.perf_counter() - start


deployed, deployed_wall = deploy(RUN, Path(tempfile.mkdtemp(prefix="uldp-deploy-")))
assert deployed["rounds_done"] == config.run.rounds, deployed
pd.DataFrame(
    [
        {
            "round": row["round"],
            "seconds": row["seconds"],
            "test loss": row["loss"],
            "user-level ε": row["epsilon"],
        }
        for row in deployed["rounds"]
    ]
).style.hide(axis="index").format(precision=3)

# %% [markdown]
# ## The same run in one process
#
# `uldp.simulation.run` with the same configuration, its enhanced-weight aggregation done by
# {ref}`Protocol 1 <paper-protocol-1>` with the same key size (`uldp.federation.SecureAggregator`: the server and the
# silos as objects in one process, every message still through its byte form). Both start from the same model and the
# same allocation; the deployed silos' noise comes from their own secrets, so the test losses agree in distribution, not
# draw for draw, and the accountant's $\varepsilon$ is the same. (With `insecure_reproducible_noise` the two runs agree
# to float precision; `tests/test_deploy_app.py` and `tests/test_deploy_flower.py` check the Flower runs against
# `uldp.fit`, bit for bit or within {ref}`Protocol 1 <paper-protocol-1>`'s precision $P$,
# {ref}`Theorem 4 <paper-theorem-4>`.) `RunConfig(secure=True)` runs the same secure aggregation in one process for
# every method, as the deployment does: that protocol for the -w methods, the pairwise masks of
# {ref}`Protocol 1 <paper-protocol-1>` alone for the others (`tests/test_secure_run.py`).

# %%
local = run(config.run, aggregate_fn=SecureAggregator(config.protocol))
deployed_loss = np.array([row["loss"] for row in deployed["rounds"]])
display(
    pd.DataFrame(
        {
            "round": range(1, len(deployed_loss) + 1),
            "test loss, deployed": deployed_loss,
            "test loss, in one process": local.test_loss,
        }
    )
    .style.hide(axis="index")
    .format(precision=4)
)
assert not deployed["insecure_reproducible_noise"]
np.testing.assert_allclose(deployed["epsilon"], local.epsilon, rtol=1e-9)

# %% [markdown]
# ## What the deployment costs per round
#
# The deployed round against the in-process one. The in-process run pays {ref}`Protocol 1 <paper-protocol-1>`'s
# set-up (Paillier keys, pairwise keys, blinded histogram) inside its first round, while the deployed server reports
# it separately; both include evaluation and accounting. The deployed silos work side by side, the in-process ones one
# after another, so from round 2 on the difference is what Flower's messages cost (serialising, gRPC, the SuperLink's
# queue, each SuperNode polling for work) minus what running in parallel saves.

# %%
deployed_rounds = np.array([row["seconds"] for row in deployed["rounds"]])
local_rounds = np.array(local.seconds)
display(
    pd.DataFrame(
        {
            "round": range(1, len(deployed_rounds) + 1),
            "deployed (s)": deployed_rounds,
            "in one process (s)": local_rounds,
            "difference (s)": deployed_rounds - local_rounds,
        }
    )
    .style.hide(axis="index")
    .format(precision=3)
)
overhead = float(np.median(deployed_rounds[1:] - local_rounds[1:]))
startup = deployed_wall - deployed_rounds.sum() - deployed["setup_seconds"]
display(
    Markdown(
        f"Round 1 of the in-process run includes the protocol's set-up. From round 2 on, a deployed round takes "
        f"{overhead:+.2f} s against an in-process one ({overhead / np.median(local_rounds[1:]):+.0%}). Once per "
        f"federation: the set-up {deployed['setup_seconds']:.2f} s (the private set union, Protocol 1's keys, "
        f"proofs and seed), and starting the SuperLink and SuperNodes, the silos' joining and shutdown "
        f"{startup:.1f} s."
    )
)

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.6))
x = np.arange(1, len(deployed_rounds) + 1)
ax.bar(
    x - 0.2, deployed_rounds, 0.4, label=f"deployed ({config.run.n_silos + 1} processes, Flower)"
)
ax.bar(x + 0.2, local_rounds, 0.4, label="in-process")
ax.set_xticks(x, [f"round {i}" for i in x])
ax.set_ylabel("seconds")
ax.set_title(
    f"ULDP-AVG-w with Protocol 1 on Creditcard: {config.run.n_users} users, "
    f"{config.protocol.key_bits}-bit keys"
)
figure_legend(fig, [ax], title=False)
show_captioned(
    fig,
    "Seconds per round of the same federation deployed (a SuperLink and a SuperNode per silo, Flower) and in one "
    f"process, with {config.protocol.key_bits}-bit keys at the {profile} profile (the paper's keys are "
    "3072-bit): round 1 of the in-process run includes the protocol's set-up.",
)

# %% [markdown]
# Flower adds little to a round: the model and {ref}`Protocol 1 <paper-protocol-1>`'s messages travel as bytes, and
# the round's cost is the local training and the Paillier arithmetic (chapter on the weighting protocol). On a real
# network, add the time to move a round's messages: with {ref}`Protocol 1 <paper-protocol-1>` about $2d$ ciphertexts
# of $2 \times$ the key size per silo (the masked update and the model), a few megabytes for this model at 3072-bit
# keys. Parallel silos can make a deployed round faster than the in-process one, whose silos run one after another;
# on a machine with fewer cores than processes they share the CPU instead. Start-up (Python imports, the SuperLink and
# SuperNodes, loading the data, joining) is paid once per federation, as is the protocol's set-up.
