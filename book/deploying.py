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
# its records never leave its machine, and the server is a third party. `uldp.deploy` runs the same methods
# (DEFAULT, ULDP-NAIVE, ULDP-GROUP-k, ULDP-SGD/AVG with enhanced weights and user sampling) as **one server process
# and one process per silo**, on [Flower](https://flower.ai) (`flwr` 1.41, no Ray, telemetry off with
# `FLWR_TELEMETRY_ENABLED=0`).
#
# **Who computes what.** Every party reads the same run configuration and derives from its seed what every party may
# know: the allocation, ULDP-GROUP-k's flags and the initial model. A silo loads the dataset, derives the allocation
# (and ULDP-GROUP-k's flags) and keeps only its own records: it trains on those alone and sends the method's silo update
# ($\Delta_s + z_s$ for ULDP-NAIVE, a DP-SGD delta for ULDP-GROUP-k, $\sum_u w_{su}\Delta_{su} + z_s$ for ULDP-SGD/AVG).
# The server holds the global model, samples the users ({ref}`Algorithm 4 <paper-algorithm-4>`), sums the updates,
# applies the server step, evaluates the model and runs the accountant. Aggregation is secure by default for every
# method (`"secure": false` opts out, and the run then reports the $\epsilon$ of the server's view): under ULDP-AVG-w
# and ULDP-SGD-w the silo's clipped per-user deltas and noise only ever leave it inside
# {ref}`Protocol 1 <paper-protocol-1>`'s masked update; under the other methods its update leaves it under
# {ref}`Protocol 1 <paper-protocol-1>`'s pairwise masks alone (`uldp.secure.masked_sum`). Either way the server learns the noisy sum over the silos alone,
# never one silo's update, and cannot remove its noise (below).
#
# **Who knows which random draw.** The server is the adversary of the paper's trust model (semi-honest,
# {ref}`Section 3.1 <paper-section-3-1>`), and it holds the configuration file, seed included. A draw whose secrecy the
# privacy argument needs must therefore never come from that seed: if a silo's noise $z_s$ did, the server could rebuild
# it with its own objects and subtract it, leaving the noise-free update (an earlier version did exactly that, see
# below). Every random draw of a deployed round:
#
# | draw | drawn by | from | who may know it |
# |---|---|---|---|
# | allocation, initial model, ULDP-GROUP-k flags $\mathbf{B}$ | every party | the shared `seed` | everyone (public) |
# | users sampled in round $t$ ({ref}`Algorithm 4 <paper-algorithm-4>`) | server | the server's own secret (OS CSPRNG) | the server; the silos receive it |
# | noise $z_s$ (ULDP-NAIVE, ULDP-SGD/AVG), DP-SGD sampling and noise (ULDP-GROUP-k), batch order, dropout | silo $s$ | silo $s$'s own 128-bit secret (`secrets`) | silo $s$ only |
# | Paillier key pair ({ref}`Protocol 1 <paper-protocol-1>` step 1(a)) | server | OS CSPRNG | public key: everyone |
# | X25519 key pair of silo $s$ (step 1(b)) | silo $s$ | OS CSPRNG | public key: everyone |
# | seed $R$ (step 1(c)), hence blinds and masks | silo 0 | `os.urandom` | the silos, never the server |
# | AEAD nonces, Paillier randomizers, handshake nonce | their sender | OS CSPRNG | public |
#
# A silo's secret seeds the method's per-round streams (the Gaussian noise is a torch generator keyed by 63 bits of that
# stream). The silos learn which users were sampled, because they train only those; the paper's trust model lets only
# the server know it ({ref}`Section 3.1 <paper-section-3-1>`), and hiding it would cost every silo training all users
# each round. The configuration field `"insecure_reproducible_noise": true` brings back the shared-seed draws so that a
# deployed run equals the in-process one draw for draw: **it voids the privacy guarantee** (the server can strip every
# silo's noise), every party logs a warning, and the server's result records it. It exists for the tests only. The
# in-process simulation (`uldp.simulation.run`) is always seeded: it models the computation, not the trust boundary.
#
# **Which Flower API.** Flower 1.41 offers two ways to run real clients. Its *Deployment Engine* (`flower-superlink`,
# `flower-supernode`, `flwr run`) starts a fresh `ClientApp` process for every message and has each SuperNode poll for
# work every 3 s. {ref}`Protocol 1 <paper-protocol-1>` needs five exchanges to set up and two per round, and each silo
# keeps secrets (its X25519 key, pairwise keys, blinds) from one stage to the next; a process per message would have to
# store them outside the process and would add seconds per stage. Flower's gRPC server and client
# (`flwr.server.start_server`, `flwr.client.start_client`, bidirectional streaming) keep one long-lived connection and
# one process per silo, answer in milliseconds, support TLS, and report a silo whose connection drops. They are marked
# deprecated since Flower 1.13 but are present and tested in the pinned 1.41.0; `uldp.deploy` uses them and keeps its
# own protocol (stages, byte formats, checkpoints) independent of that choice.
#
# **What travels.** Every stage is one Flower `FitIns` to each silo, answered by one `FitRes`. The stage name and small
# values ride in Flower's typed maps; model vectors, sampled users and {ref}`Protocol 1 <paper-protocol-1>`'s messages
# ride as bytes in explicit formats (`uldp.common.persist`: dtype, shape, data and a SHA-256 digest; `uldp.secure.messages`
# for the protocol). Nothing is pickled.
#
# **Faults.** A silo that drops out (crash, network, timeout) or reports an error aborts the round: nothing of it
# is applied, the server exits with a clear error, and the checkpoint (written atomically after every completed
# round) still holds the last good model. Restarting the same command resumes from it. A silo with another
# configuration, a wrong id or a wrong key is refused at the handshake, told why, and the server keeps waiting for
# the right one.
#
# ## The commands
#
# Every party gets the same configuration file: the fields of `uldp.simulation.RunConfig` (unset ones take the
# paper's values), plus optionally {ref}`Protocol 1 <paper-protocol-1>`'s public parameters. For example `run.json`:
#
# ```json
# {"dataset": "creditcard", "method": "ULDP-AVG-w", "n_users": 100, "n_silos": 3, "rounds": 10, "seed": 0,
#  "q": 0.5, "secure": true, "protocol": {"key_bits": 3072, "n_max": 2000}}
# ```
#
# `python -m uldp.deploy.legacy_cli keys` draws a master key for the server and derives one key per silo; the server
# checks each silo's HMAC of a fresh nonce.
#
# ```text
# python -m uldp.deploy.legacy_cli keys --silos 3 --out keys/
# python -m uldp.deploy.legacy_cli server --config run.json --address 0.0.0.0:8080 --checkpoint model.ckpt \
#     --master-key-file keys/master.key
# python -m uldp.deploy.legacy_cli silo --silo-id 0 --config run.json --server server.example.org:8080 \
#     --key-file keys/silo-0.key
# ```
#
# With TLS, the server adds `--ssl-ca-certfile ca.crt --ssl-certfile server.crt --ssl-keyfile server.key` and each
# silo `--root-certificates ca.crt`. This page runs that earlier runtime as `python -m uldp.deploy.legacy_cli`;
# `uldp deploy` itself now runs on Flower's SuperLink and SuperNodes (README, "Running on several machines"). A short
# run on the `synthetic` dataset makes a dress rehearsal of machines, certificates and keys.

# %% tags=["parameters"]
profile = "default"

# %%
import json
import logging
import os
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

from uldp.deploy.method_roles import DeployConfig
from uldp.paper.chapters import show_captioned
from uldp.paper.plots import figure_legend
from uldp.secure import SecureAggregator
from uldp.simulation import run

os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
SIZES = {
    "smoke": dict(
        n_users=20,
        rounds=3,
        local_epochs=1,
        max_train_records=200,
        protocol={"key_bits": 512, "n_max": 40, "insecure_test_key": True},
    ),
    # small enough that the page builds in a few minutes: its real processes and 2048-bit keys cost per round (each
    # round took about 70 s in one process on a loaded 2-core machine, so two rounds, the least that shows round 2 on)
    "default": dict(
        n_users=20,
        rounds=2,
        local_epochs=1,
        max_train_records=400,
        protocol={"key_bits": 2048, "n_max": 100},
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
        + f", with {config.protocol.key_bits}-bit keys"
        + (
            ""
            if profile == "paper"
            else f": a small federation, so that the page builds in minutes (the paper profile runs "
            f"{paper_size['n_users']} users for {paper_size['rounds']} rounds on every record with "
            f"{paper_size['protocol']['key_bits']}-bit keys). Its run:"
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
            ("seed (allocation and initial model)", config.run.seed),
        ],
        columns=["setting", "value"],
    ).style.hide(axis="index"),
)

# %% [markdown]
# ## One federation on this machine
#
# A server and three silo processes on localhost (insecure transport; TLS adds a handshake per connection, not per
# round), each started with the command above. The server prints its per-round history as JSON: seconds per stage,
# test metrics and the user-level $\varepsilon$ spent so far.


# %%
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def deploy(data: dict, workdir: Path) -> tuple[dict, float]:
    """Run a server and one process per silo with ``python -m uldp.deploy.legacy_cli``: (server's JSON, wall
    seconds)."""
    path = workdir / "run.json"
    path.write_text(json.dumps(data))
    port, common = free_port(), ["--config", str(path), "--json", "--quiet"]
    command = [sys.executable, "-m", "uldp.deploy.legacy_cli"]
    start = time.perf_counter()
    server = subprocess.Popen(
        [
            *command,
            "server",
            "--address",
            f"127.0.0.1:{port}",
            "--join-timeout",
            "300",
            "--checkpoint",
            str(workdir / "model.ckpt"),
            *common,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the processes' logs (a slow machine's "still waiting for silo(s)") stay out of the page; a silo that fails is
    # named in the server's error, and a server that writes no result shows its log
    silos = [
        subprocess.Popen(
            [
                *command,
                "silo",
                "--silo-id",
                str(s),
                "--server",
                f"127.0.0.1:{port}",
                "--max-wait",
                "300",
                *common,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for s in range(config.run.n_silos)
    ]
    output, log = server.communicate(timeout=3600)
    for silo in silos:
        silo.wait(timeout=120)
    if not output.strip():
        raise RuntimeError(
            f"the server wrote no result (exit status {server.returncode}); its log:\n{log}"
        )
    return json.loads(output.strip().splitlines()[-1]), time.perf_counter() - start


deployed, deployed_wall = deploy(RUN, Path(tempfile.mkdtemp(prefix="uldp-deploy-")))
assert deployed["error"] == "", deployed["error"]
pd.DataFrame(
    [
        {
            "round": record["round"],
            "seconds": record["seconds"],
            **{
                f"{name.replace('_', ' ')} (s)": seconds
                for name, seconds in record["stages"].items()
            },
            "test loss": record["loss"],
            "user-level ε": record["epsilon"],
        }
        for record in deployed["history"]
    ]
).style.hide(axis="index").format(precision=3)

# %% [markdown]
# ## The same run in one process
#
# `uldp.simulation.run` with the same configuration, its enhanced-weight aggregation done by
# {ref}`Protocol 1 <paper-protocol-1>` with the same key size (`uldp.secure.SecureAggregator`: the server and the
# silos as objects in one process, every message still through its byte form). Both start from the same model and the
# same allocation; the deployed silos' noise comes from their own secrets, so the test losses agree in distribution, not
# draw for draw, and the accountant's $\varepsilon$ is the same. (With `insecure_reproducible_noise` the two runs agree
# to float precision, {ref}`Protocol 1 <paper-protocol-1>`'s aggregate being within $P = 10^{-10}$ of the plain sum,
# {ref}`Theorem 4 <paper-theorem-4>`; `tests/test_deploy.py` checks it with real processes.)

# %%
local = run(config.run, aggregate_fn=SecureAggregator(config.protocol))
deployed_loss = np.array([record["loss"] for record in deployed["history"]])
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
assert [record["epsilon"] for record in deployed["history"]] == local.epsilon

# %% [markdown]
# ## The server cannot remove the noise
#
# The attack of a curious server, run against the deployment's own roles (`MethodServer`, `MethodSilo`) for one
# round: the server rebuilds each silo's noise from the shared configuration with its own objects and subtracts it
# from what the silo sent. With the silos' own secrets, what remains is two independent noises (standard deviation
# $\sqrt 2\,\sigma_z$); with the insecure option it is the clean update, far smaller than the noise.
# `tests/test_deploy_security.py` runs the same attack for every method that adds noise at the silos and on
# {ref}`Protocol 1 <paper-protocol-1>`'s decoded aggregate.

# %%
from uldp.data import load
from uldp.deploy.method_roles import MethodServer, MethodSilo
from uldp.fitting import round_seed

dataset = load(config.run.dataset)
# the insecure option is shown here on purpose: its warning to deployments (logged by uldp.deploy) is not for the page
logging.getLogger("uldp.deploy").setLevel(logging.ERROR)
attack = []
for insecure in (False, True):
    attacked = DeployConfig.from_json(
        {**RUN, "secure": False, "insecure_reproducible_noise": insecure}
    )
    server = MethodServer(attacked, dataset)
    params, sampled = server.initial_params(), server.sampled_users(1)
    shared = round_seed(np.random.SeedSequence(attacked.run.seed), 0)  # round 1
    residual = np.concatenate(
        [
            MethodSilo(attacked, s, dataset).contribution(params, 1, sampled)
            - server.method.silo_noise(params.size, server.n_silos, shared, s).numpy()
            for s in range(server.n_silos)
        ]
    )
    noise_std = server.method.noise_std(server.n_silos)
    attack.append(
        {
            "silos' noise": "from the shared seed (tests only)"
            if insecure
            else "their own secrets",
            "std of what the server is left with": f"{residual.std():.4f}",
            "per-silo noise std": f"{noise_std:.2f}",
            "ratio": f"{residual.std() / noise_std:.3f}",
        }
    )
pd.DataFrame(attack).style.hide(axis="index")

# %% [markdown]
# ## What the deployment costs per round
#
# Two measures. First, each silo reports how long it computed for each exchange; the rest of the exchange's wall time at
# the server is **transport**: serialising the model and {ref}`Protocol 1 <paper-protocol-1>`'s messages, gRPC, Flower
# and waking the processes. Second, the deployed round against the in-process one. The in-process run pays
# {ref}`Protocol 1 <paper-protocol-1>`'s setup (Paillier keys, pairwise keys, blinded histogram) inside its first round,
# while the deployed server reports it separately; both include evaluation and accounting. The deployed silos work side
# by side, the in-process ones one after another, so from round 2 on the difference is the transport minus what running
# in parallel saves.

# %%
deployed_rounds = np.array([record["seconds"] for record in deployed["history"]])
transport = np.array(
    [record["stages"]["silos"] - record["stages"]["silo_compute"] for record in deployed["history"]]
)
local_rounds = np.array(local.seconds)
display(
    pd.DataFrame(
        {
            "round": range(1, len(deployed_rounds) + 1),
            "deployed (s)": deployed_rounds,
            "of which transport (ms)": (transport * 1000).round(),
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
        f"Round 1 of the in-process run includes the protocol's set-up. The median transport per round is "
        f"{np.median(transport) * 1000:.0f} ms ({np.median(transport / deployed_rounds):.1%} of a deployed "
        f"round); from round 2 on, a deployed round takes {overhead * 1000:+.0f} ms against an in-process "
        f"one ({overhead / np.median(local_rounds[1:]):+.0%}). Once per federation: the protocol's set-up "
        f"{deployed['setup_seconds']:.2f} s, and process start-up, admission and shutdown {startup:.1f} s."
    )
)

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.6))
x = np.arange(1, len(deployed_rounds) + 1)
ax.bar(x - 0.2, deployed_rounds, 0.4, label=f"deployed ({config.run.n_silos + 1} processes, gRPC)")
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
    "Seconds per round of the same federation deployed (one process per silo, gRPC) and in one "
    f"process, with {config.protocol.key_bits}-bit keys at the {profile} profile (the paper's keys are "
    "3072-bit): round 1 of the in-process run includes the protocol's set-up.",
)

# %% [markdown]
# The transport adds little to a round: the model and {ref}`Protocol 1 <paper-protocol-1>`'s messages travel as bytes
# over one long-lived stream per silo, and the round's cost is the local training and the Paillier arithmetic (chapter
# on the weighting protocol). On a real network, add the time to move a round's messages: with
# {ref}`Protocol 1 <paper-protocol-1>` about $2d$ ciphertexts of $2 \times$ the key size per silo (the masked update and
# the model), a few megabytes for this model at 3072-bit keys. Parallel silos can make a deployed round faster than the
# in-process one, whose silos run one after another; on a machine with fewer cores than processes they share the CPU
# instead. Start-up (Python imports, loading the data, connecting) is paid once per federation, as is the protocol's
# setup.
