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
# its records never leave its machine, and the server is a third party. `uldp.deploy` runs the same federation as
# **one server process and one process per silo**, on [Flower](https://flower.ai) (`flwr` 1.41, no Ray, telemetry
# off with `FLWR_TELEMETRY_ENABLED=0`).
#
# **Which Flower API.** Flower 1.41 offers two ways to run real clients. Its *Deployment Engine* (`flower-superlink`,
# `flower-supernode`, `flwr run`) starts a fresh `ClientApp` process for every message and has each SuperNode poll
# for work every 3 s. Protocol 1 needs five exchanges to set up and two per round, and each silo keeps secrets (its
# X25519 key, pairwise keys, blinds) from one stage to the next; a process per message would have to store them
# outside the process and would add seconds per stage. Flower's gRPC server and client
# (`flwr.server.start_server`, `flwr.client.start_client`, bidirectional streaming) keep one long-lived connection
# and one process per silo, answer in milliseconds, support TLS, and report a silo whose connection drops. They are
# marked deprecated since Flower 1.13 but are present and tested in the pinned 1.41.0; `uldp.deploy` uses them and
# keeps its own protocol (stages, byte formats, checkpoints) independent of that choice.
#
# **What travels.** Every stage is one Flower `FitIns` to each silo, answered by one `FitRes`. The stage name and
# small values ride in Flower's typed maps; model vectors, sampled users and Protocol 1's messages ride as bytes in
# explicit formats (`uldp.deploy.wire`: dtype, shape, data and a SHA-256 digest; `uldp.secure.messages` for the
# protocol). Nothing is pickled.
#
# **Faults.** A silo that drops out (crash, network, timeout) or reports an error aborts the round: nothing of it
# is applied, the server exits with a clear error, and the checkpoint (written atomically after every completed
# round) still holds the last good model. Restarting the same command resumes from it. A silo with another
# configuration, a wrong id or a wrong key is refused at the handshake, told why, and the server keeps waiting for
# the right one.
#
# ## The commands
#
# Every party gets the same configuration file. `uldp deploy keys` draws a master key for the server and derives
# one key per silo; the server checks each silo's HMAC of a fresh nonce.
#
# ```text
# uldp deploy keys --silos 3 --out keys/
# uldp deploy server --config run.json --address 0.0.0.0:8080 --checkpoint model.ckpt --master-key-file keys/master.key
# uldp deploy silo --silo-id 0 --config run.json --server server.example.org:8080 --key-file keys/silo-0.key
# ```
#
# With TLS, the server adds `--ssl-ca-certfile ca.crt --ssl-certfile server.crt --ssl-keyfile server.key` and each
# silo `--root-certificates ca.crt`. A configuration `{"rehearsal": {...}}` runs everything (processes, TLS,
# keys, Protocol 1, checkpoints) on synthetic deltas with no data: a dress rehearsal, and what this chapter measures.

# %% tags=["parameters"]
profile = "default"

# %%
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from uldp.deploy.rehearsal import RehearsalConfig, rehearsal_oracle
from uldp.secure import SecureSession

os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
SIZES = {
    "smoke": dict(n_silos=3, n_users=10, dimension=16, rounds=3, key_bits=1024, insecure_test_key=True),
    "default": dict(n_silos=3, n_users=20, dimension=16, rounds=3, key_bits=2048),
    "paper": dict(n_silos=3, n_users=20, dimension=16, rounds=5, key_bits=3072),
}
config = RehearsalConfig(seed=0, q=1.0, **SIZES[profile])
config

# %% [markdown]
# ## One federation on this machine
#
# A server and three silo processes on localhost (insecure transport; TLS adds a handshake per connection, not per
# round). The server prints its per-round history as JSON.


# %%
def deploy_once(config: RehearsalConfig, workdir: Path, port: int) -> dict:
    """Run a server and one process per silo with ``python -m uldp.deploy.cli``; return the server's JSON."""
    path = workdir / "run.json"
    path.write_text(json.dumps({"rehearsal": asdict(config)}))
    common = ["--config", str(path), "--json", "--quiet"]
    command = [sys.executable, "-m", "uldp.deploy.cli"]
    server = subprocess.Popen(command + ["server", "--address", f"127.0.0.1:{port}", "--join-timeout", "120",
                                         "--checkpoint", str(workdir / "model.ckpt"), *common],
                              stdout=subprocess.PIPE, text=True)
    silos = [subprocess.Popen(command + ["silo", "--silo-id", str(s), "--server", f"127.0.0.1:{port}", *common],
                              stdout=subprocess.DEVNULL) for s in range(config.n_silos)]
    output, _ = server.communicate(timeout=600)
    for silo in silos:
        silo.wait(timeout=60)
    return json.loads(output.strip().splitlines()[-1])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


workdir = Path(tempfile.mkdtemp(prefix="uldp-deploy-"))
deployed = deploy_once(config, workdir, free_port())
assert deployed["error"] == "", deployed["error"]
deployed_rounds = [record["seconds"] for record in deployed["history"]]
print(f"setup {deployed['setup_seconds']:.2f} s; rounds: " + ", ".join(f"{s:.3f} s" for s in deployed_rounds))

# %% [markdown]
# The deployed model equals the plain computation to within the protocol's precision $P = 10^{-10}$ per round
# (Theorem 4):

# %%
from uldp.deploy.checkpoint import load_checkpoint
from uldp.deploy.wire import fingerprint

final = load_checkpoint(workdir / "model.ckpt", config_fingerprint=fingerprint({"rehearsal": asdict(config)}))
error = float(np.abs(final.params - rehearsal_oracle(config)).max())
print(f"max |deployed - plain| = {error:.2e}")
assert error <= config.rounds * 1e-9

# %% [markdown]
# ## The same rounds in one process
#
# `uldp.secure.SecureSession` runs the same Protocol 1 stages with the server and the silos as objects in one
# process (every message still goes through its byte form). The difference is what processes, gRPC and Flower add
# per round.


# %%
def in_process_rounds(config: RehearsalConfig) -> tuple[float, list[float]]:
    start = time.perf_counter()
    session = SecureSession(config.counts, clip=0.5, key_bits=config.key_bits, insecure_test_key=config.insecure_test_key,
                            n_max=max(1, int(config.counts.sum(axis=0).max())))
    setup = time.perf_counter() - start
    params, seconds = np.zeros(config.dimension), []
    for round_index in range(1, config.rounds + 1):
        start = time.perf_counter()
        deltas = np.stack([config.deltas(s, params, round_index) for s in range(config.n_silos)])
        params = params + session.aggregate(deltas, np.zeros((config.n_silos, config.dimension)),
                                            config.sampled(round_index))
        seconds.append(time.perf_counter() - start)
    return setup, seconds


local_setup, local_rounds = in_process_rounds(config)
rows = [("setup (keys, pairwise keys, histograms)", deployed["setup_seconds"], local_setup)] + [
    (f"round {i + 1}", d, l) for i, (d, l) in enumerate(zip(deployed_rounds, local_rounds))
]
for name, d, l in rows:
    print(f"{name:42s} deployed {d:7.3f} s   in-process {l:7.3f} s   overhead {d - l:+.3f} s")
overhead = float(np.median(np.array(deployed_rounds) - np.array(local_rounds)))
print(f"median per-round overhead of the deployment: {overhead * 1000:.0f} ms")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
labels = [name.split(" (")[0] for name, _, _ in rows]
x = np.arange(len(rows))
ax.bar(x - 0.2, [d for _, d, _ in rows], 0.4, label="deployed (4 processes, gRPC)")
ax.bar(x + 0.2, [l for _, _, l in rows], 0.4, label="in-process")
ax.set_xticks(x, labels)
ax.set_ylabel("seconds")
ax.set_title(f"Protocol 1, {config.n_silos} silos, {config.n_users} users, d={config.dimension}, {config.key_bits}-bit")
ax.legend()
plt.show()

# %% [markdown]
# On a small machine the parallel silos share the CPU, so the deployed round can even be faster than the
# in-process one (where the silos run one after another) or slower by the cost of moving the messages; in both
# cases the transport adds milliseconds to rounds whose cost is dominated by the Paillier arithmetic
# (chapter on the weighting protocol). Start-up (Python imports, connections) is paid once per federation.
