"""The silo is where differential privacy is enforced: its own privacy policy and its record of what it released.

A silo (a hospital) holds a :class:`SiloPolicy` in its own configuration (a Flower SuperNode's ``--node-config``,
:meth:`SiloPolicy.from_node_config`; a deployed silo's policy file, :meth:`SiloPolicy.from_json`), never taken from
the server. Before answering a round it checks the server's request against the policy (:meth:`SiloPolicy.check`:
sigma, local epochs, records, the size of the user sample) and against its :class:`SiloLedger`, the persistent
record of the rounds it answered and of the noise it released: each round index is answered at most once (so the
server can never average two noisy answers of one round, nor subtract two masked updates under the same masks), and
the user-level epsilon of everything released stays within the policy's target. A refusal is a
:class:`PolicyRefusal` whose message names the request's bad value and the policy's bound; the silo logs it and
sends it to the server as its answer's error.

What a release costs (Theorem 3, Lemma 4; :func:`uldp.accounting.epsilon_of_releases`): with secure aggregation the
server sees only the sum, whose noise has multiplier sigma; without it the server sees this silo's update, whose
noise has std ``sigma C / sqrt(|S|)`` against a user's weight ``w_su`` there, up to 1 for a user whose records all
sit in this silo under enhanced weights: multiplier ``sigma / sqrt(|S|)``
(:func:`uldp.accounting.epsilon_server_view`). With uniform weights (``w_su = 1 / |S|``) the view costs what the
released model costs.

User sampling (Algorithm 4) is charged at the policy's own rate ``q`` and by who draws the sample, never at a rate
the server claims: Lemma 4's amplification holds only against an adversary that does not know the sample (the
paper's paragraph "Private user-level sub-sampling"). With ``sampler="server"`` (the default: Protocol 1's server
draws the sample and sends it, so it may choose it, a target in every round) every round is charged at ``q = 1``
(:attr:`~uldp.accounting.Adversary.SERVER_CHOOSES_SAMPLE`); with ``sampler="silos"`` (the silos draw it from
randomness the server never learns) at the policy's ``q``, amplified
(:attr:`~uldp.accounting.Adversary.MODEL_READERS`). A server that repeats one sample and model to average the noise
away is charged every round as such, and refused at the cap.

With a collusion threshold ``t`` (``colluders``) each silo's noise share is scaled so that the noise of the
``|S| - t`` honest silos alone has the run's std (:func:`collusion_scale`; a federation's epsilons hold against the
smallest threshold of its silos, :func:`collusion_thresholds`). Every epsilon a silo reports says whom it holds
against (:attr:`SiloPolicy.against`): which server (``malicious_server``) and how many colluding silos.

ULDP-GROUP-k's rounds are record-level DP-SGD at each silo (Algorithm 2); the silo accounts each as a
:class:`GroupRelease` at the group-privacy epsilon of its own DP-SGD (Theorem 2 for this silo: its record-level RDP
curves add over rounds, then RDP group privacy for k, :func:`uldp.accounting.group.group_epsilon_bounds`), what the
method's accountant reports with this silo's schedule. A ledger that holds both kinds of release adds their epsilons,
each at half the policy's delta (basic composition).

The ledger is a JSON file written atomically before the answer leaves the silo (a crash after writing costs budget,
never privacy); without a file it lives in memory and is lost with the process. Beside a ledger file the silo keeps
a marker that it has answered (:data:`ANSWERED_SUFFIX`): a silo whose marker is there and whose ledger is not
refuses to answer (a lost ledger would reset its replay protection and its budget). A Flower silo's ledger file is
:func:`node_ledger_path` unless its node config names one.
"""

from uldp.policy.ledger import (
    ANSWERED_SUFFIX,
    GroupRelease,
    SiloLedger,
    epsilon_of_group_releases,
    node_ledger_path,
)
from uldp.policy.rules import (
    NODE_CONFIG_PREFIX,
    NOISE_TAIL,
    SAMPLERS,
    PolicyRefusal,
    SiloPolicy,
    adversary_words,
    collusion_scale,
    collusion_thresholds,
    release_multiplier,
    update_norm_bound,
)

__all__ = [
    "ANSWERED_SUFFIX",
    "NODE_CONFIG_PREFIX",
    "NOISE_TAIL",
    "SAMPLERS",
    "GroupRelease",
    "PolicyRefusal",
    "SiloLedger",
    "SiloPolicy",
    "adversary_words",
    "collusion_scale",
    "collusion_thresholds",
    "epsilon_of_group_releases",
    "node_ledger_path",
    "release_multiplier",
    "update_norm_bound",
]
