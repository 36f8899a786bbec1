# %% [markdown]
# # Protocol 1 in practice
#
# {doc}`weighting_protocol` runs {ref}`Protocol 1 <paper-protocol-1>` as the paper states it: between parties that
# follow it ({ref}`Section 3.1 <paper-section-3-1>`), on a user set $U$ that the silos are assumed to share, at the
# model sizes of the paper's runtime figures. This chapter goes beyond the paper on each count: how the silos of a
# real federation agree on $U$, what each party then learns, what a server that deviates from the protocol can
# still do and which $\epsilon$ holds against it; and the protocol at deep-model scale, which the paper leaves open at
# the end of its runtime results ({ref}`Section 5.2 <paper-section-5-2>`), with a packed Paillier backend and a lattice
# (Ring-LWE) one.

# %% tags=["parameters"]
profile = "default"

# %%
import numpy as np
import pandas as pd

from uldp.paper.chapters import benchmark_result
from uldp.secure.psu import DEFAULT_GROUP, private_set_union

# %% [markdown]
# ## Who learns what, and who enforces the guarantee
#
# The protocol assumes a public user set $U$ ({ref}`Section 3.1 <paper-section-3-1>`); a federation has to agree on one.
# What each party of `uldp.flower` and `uldp deploy` learns, with secure aggregation (the default for ULDP-AVG-w):
#
# - **The server** learns $|S|$, $|U|$, each silo's number of records and of distinct users (the sizes of what it
#   relays), the users it samples, $B(N_u) = r_u N_u$ (uniform on $\mathbb{Z}_n^*$ when $N_u > 0$, $0$ otherwise: so it
#   learns which users have no record at all) and the decoded noisy sum. It never sees a patient id, a blinded value
#   (the silos' lists travel sealed under a key it lacks) or any $n_{s,u}$, so not which silo holds which user.
# - **A silo** learns its own records, the protocol's blinds $r_u$ (shared by all silos), the encrypted weights and
#   the weight powers (which any silo could compute itself) and, from agreeing on $U$ on Flower, $|U|$, every other
#   silo's number of patients, **which of its own patients each other silo also holds**, and how many pseudorandom
#   users any two other silos share (never how many records, except in a plain ULDP-AVG-w run, the explicit opt-out,
#   where the enhanced weights need every $n_{s,u}$). It **cannot test a guessed patient id** against another silo's
#   patients. The silos agree on $U$ by a private set union with commutative Diffie-Hellman blinding (Meadows 1986;
#   Huberman, Franklin and Hogg 1999; `uldp.secure.psu`): every silo hashes its ids into the quadratic residues of
#   RFC 3526's 2048-bit safe-prime group and raises them to a secret exponent drawn for this run; the lists go round
#   the silos through the server, sealed, until every element carries every silo's exponent,
#   $F(x) = H(x)^{a_1 \cdots a_{|S|}}$, and the sorted union of the $F$ values numbers the users. A silo can raise
#   $H(\text{guess})$ to its own exponent only, so under the decisional Diffie-Hellman assumption another silo's $F$
#   values are pseudorandom to it; what remains is what the enhanced weights need (a patient's records at the other
#   hospitals count in $N_u$): a hospital learns that a patient it treats was treated elsewhere, nothing about a
#   patient it does not treat. (A silo that departs from the protocol and enters guessed ids as its own learns
#   which of them others hold, as with any set union.) Each silo answers each step of one session once and in order,
#   so a server that repeats, reorders or drops messages is refused by name and learns nothing more; a new set-up
#   draws new exponents. The shared-key HMAC pseudonyms used before let any silo run a dictionary over guessable ids
#   against another hospital's list (20 of 20 of its patients recovered, `tests/test_psu.py`).
#   In `uldp deploy` the users and their allocation come from the shared configuration's seed: public to every
#   party, the server included, by construction (a dress rehearsal on registered datasets), so there are no private
#   ids to hide and no union to run.

# %%
consortium = [
    [f"P-{i:03d}" for i in range(30)],
    [f"P-{i:03d}" for i in range(20, 45)],
    [f"P-{i:03d}" for i in range(40, 50)],
]
numbered = private_set_union(consortium)  # three silos, the default group, fresh exponents
patients = sorted(set().union(*map(set, consortium)))
numbers = {
    p: {int(r.index_of([p])[0]) for r, ids in zip(numbered, consortium, strict=True) if p in ids}
    for p in patients
}
assert numbered[0].n_users == len(patients) and all(len(n) == 1 for n in numbers.values())
cost = benchmark_result("psu")["results"]
print(
    f"{DEFAULT_GROUP.name} ({DEFAULT_GROUP.p.bit_length()}-bit): |U| = {numbered[0].n_users}; each patient held "
    f"by several silos has the same number at each of them. Set-up at |U| = {cost['users']}, {cost['silos']} "
    f"silos (benchmarks/psu.py): {cost['exponentiations_per_silo']} exponentiations per silo, "
    f"{cost['slowest_silo_seconds']:.0f} s for the slowest silo "
    f"({cost['slowest_silo_seconds_per_element'] * 1e3:.1f} ms per element and hop), "
    f"{cost['seconds_all_silos_in_one_process']:.0f} s for all silos in one process, on {cost['cores']} cores "
    f"shared with other work (load average {cost['load_average']['before']:.0f})"
)

# %% [markdown]
# Nothing the server sends changes a silo's randomness, budget or answers: each silo holds its own privacy policy
# (`uldp.policy.SiloPolicy`: accountant, target $\epsilon$ and $\delta$, minimum $\sigma$, most rounds, local epochs
# and records, smallest user sample), refuses by name whatever exceeds it, answers each round index once (a ledger
# written before the answer leaves; the protocol's masks are a function of the round index, so a second masked update of
# one round would let the key holder subtract the masks) and accounts for what the server really sees: without
# secure aggregation each silo's update carries noise $\sigma C / \sqrt{|S|}$ against a weight up to 1 under the
# enhanced weights (`uldp.accounting.epsilon_server_view`).

# %% [markdown]
# **Beyond the semi-honest server: its key.** {ref}`Protocol 1 <paper-protocol-1>` blinds the counts with units of
# $\mathbb{Z}_n$ under the server's Paillier modulus $n$. A malicious server could send an $n$ built of many small primes, and then
# $\gcd(B(N_u), n)$ would reveal the odd part of every user's record count. A silo therefore uses $n$ only once the
# server has proved it well formed, non-interactively, with the two proofs of Canetti, Gennaro, Goldfeder,
# Makriyannis and Peled 2020 (`uldp.secure.modulus_proof`): a Paillier-Blum modulus proof ($n$ is the product of two
# distinct primes) and a no-small-factor proof, made in a ring-Pedersen group that the silo drew itself and bound
# to the silo, the session and a fresh nonce of the silo's, so a proof cannot be replayed to another silo or session.
# What it does not stop: a server with a well-formed key still chooses the weights it encrypts, what it relays and
# when it aborts. The pairwise masks, not the key, hide one silo's update, and only if the X25519 keys they come from
# are the silos' own: a server that relayed keys of its own would sit in the middle of every pair. So each silo has a
# long-term identity and holds the federation's roster, made by the silos out of band like SSH's `known_hosts`
# (`uldp.secure.roster`, `uldp roster`); every silo signs its key, bound to the session, and checks every relayed key
# against its roster, aborting with the name of the silo whose key fails. With `sample_rate` the silos also draw each
# round's user sample from a seed the server never sees (`uldp.secure.sampling`: a PRF of the seed below $q$;
# unsampled users add zero and the server encrypts every user's weight), so the sample stays hidden from the server,
# as amplification by user sub-sampling needs. Two slacks remain, stated. The server checks the
# decoded sum against the sum of the silos' bounds, so one silo can move the model up to $|S|$ times an honest silo's
# bound; no cheap range proof per silo exists for the ring masks. And a silo's noise share $\sigma C / \sqrt{|S|}$
# assumes the others add theirs: silos that collude and leave their shares out leave the sum with the honest silos'
# shares only; a collusion threshold $t$ in the silos' policy (`uldp-policy-colluders`) scales each share by
# $\sqrt{|S| / (|S| - t)}$ so that the honest shares alone keep $\sigma$. The cost at the paper's key size, by
# `benchmarks/modulus_proof.py` (committed):

# %%
from IPython.display import Markdown, display

proof_cost = benchmark_result("modulus_proof")
proof_median = proof_cost["results"]["median"]
display(
    Markdown(
        f"At {proof_cost['results']['key_bits']}-bit keys both factors of $n$ are proved to have at least "
        f"{proof_cost['results']['smallest_factor_bits']} bits. A silo makes its ring-Pedersen parameters once "
        f"({proof_cost['results']['silo_ring_pedersen_once_s']:.1f} s, public and kept across sessions); per silo and "
        f"session the server proves in {proof_median['server_prove_s']:.1f} s "
        f"({proof_cost['results']['prove_over_keygen']:.1f} times its key generation) and the silo verifies in "
        f"{proof_median['silo_verify_s']:.1f} s, with {(proof_median['proof_bytes'] + proof_median['ring_pedersen_bytes']) / 1e3:.0f} kB "
        f"on the wire (medians of {proof_cost['results']['repeats']} sessions; "
        f"{proof_cost['provenance']['command']} at {proof_cost['provenance']['git_commit'][:7]})."
    )
)

# %% [markdown]
# **Adversary by adversary.** What each adversary learns of a secure ULDP-AVG-w run, and the user-level $\epsilon$
# that still holds against it (`uldp.secure.adversaries`, from the library's accountants), with the user sample drawn
# by the server or hidden among the silos, and with or without the silos' roster. A server that sees the sample gets
# the known-sample $\epsilon$; one that may choose it (a malicious server draws it), the $\epsilon$ at $q = 1$; one
# without the silos' roster swaps the keys it relays and unmasks every silo's update, each with only its noise share.
# A colluding silo knows the silos' sample, so hiding it does not help against it, and $t$ colluders remove their
# noise shares unless the policy's threshold is at least $t$. On Flower a silo that names its identity and roster
# asks for a malicious server's guarantee by default (`uldp-policy-malicious-server`); every silo logs which
# adversary its $\epsilon$ holds against when the run starts, and the strategy's `against` says it for the run.
# What a malicious server with a roster can still do: stop the run, or drop a silo (the round aborts).

# %%
from uldp.secure.adversaries import adversary_rows

threat = {"sigma": 5.0, "rounds": 100, "delta": 1e-5, "q": 0.1, "n_silos": 4, "colluders": 2}
adversaries = pd.DataFrame(
    {
        "adversary": row.adversary,
        "user sample drawn by": row.sample,
        "silos' roster": "—" if row.roster is None else "yes" if row.roster else "no",
        "policy's collusion threshold t": row.colluders,
        "what it learns": row.learns,
        "user-level ε": row.epsilon,
    }
    for row in adversary_rows(**threat)
)
display(
    Markdown(
        f"At σ = {threat['sigma']:g}, {threat['rounds']} rounds, δ = {threat['delta']:g}, q = {threat['q']:g} "
        f"and |S| = {threat['n_silos']} (the README's example). — in the roster column: it does not matter "
        f"(the server follows the protocol)."
    )
)
adversaries.style.hide(axis="index").format(precision=2, subset=["user-level ε"])

# %% [markdown]
# The tiny federation of {doc}`weighting_protocol` for the examples below: three silos and four users (user 3 only
# in silo 2, user 1 not sampled this round), deltas of three parameters, and the plain weighted sum that the
# protocol must reproduce within $P$.

# %%
from uldp.secure import ProtocolParameters, SecureSession, encoding

rng = np.random.default_rng(0)
counts = np.array([[3, 0, 5, 0], [1, 2, 0, 0], [4, 0, 1, 7]])
dim = 3
deltas = rng.uniform(-1, 1, size=(3, 4, dim))
deltas[counts == 0] = 0.0
noise = rng.normal(scale=0.5, size=(3, dim))
sampled = np.array([True, False, True, True])
plain = np.einsum(
    "su,sud->d", np.where(sampled, counts / counts.sum(axis=0), 0.0), deltas
) + noise.sum(axis=0)

# %% [markdown]
# ## Deep models: the paper's open problem
#
# The paper closes its runtime results ({ref}`Section 5.2 <paper-section-5-2>`) with the protocol's cost growing
# linearly with the parameters, and calls deep models with millions of parameters a future challenge. Two costs grow
# with the parameters in {ref}`Protocol 1 <paper-protocol-1>` as written: every parameter is one 3072-bit Paillier
# plaintext, so each silo sends one 6144-bit ciphertext per parameter and the server decrypts one per parameter; and
# the weights $n_{s,u} C_{\text{LCM}} / N_u$ carry $C_{\text{LCM}}$, which for $N_{\max} = 2000$ takes nearly the
# whole plaintext (the cell below prints its size), so one parameter's aggregate fills a plaintext and nothing can
# share it.
#
# The backend `"packed-paillier"` (`ProtocolParameters(backend="packed-paillier")`, `uldp.secure.packing`) removes
# both, in the same parties and stages. Each round the exact weight is turned into a fixed-point one,
# $w_u \approx 2^g / N_u$ with $|w_u - 2^g / N_u| < 1$: the silo that computes $\mathrm{Enc}(C_{\text{LCM}} / N_u)$
# sends the server $\mathrm{Enc}(C_{\text{LCM}} / N_u + \rho_u)$, whose blind $\rho_u$ (128 bits longer than
# $C_{\text{LCM}}$, drawn from the silos' seed $R$) leaves the server's view within $2^{-128}$ of one independent of
# $N_u$; the server returns $\mathrm{Enc}(\lfloor z_u 2^g / C_{\text{LCM}} \rfloor)$ and every silo removes
# $\lfloor \rho_u 2^g / C_{\text{LCM}} \rfloor$ homomorphically. Then the aggregates of $K$ parameters share one
# plaintext in signed slots of $b$ bits,
# $\prod_k \mathrm{Enc}(A_{jk})^{2^{bk}} = \mathrm{Enc}(\sum_k A_{jk} 2^{bk})$, masked as a whole: the pairwise
# masks still cancel exactly in the product over silos. The module's docstrings prove the bounds this rests on: the
# slot bound (no slot overflows into the next for any $N_u \le N_{\max}$, users, silos and noise within the public
# bounds), the packed integer below $n / 2$, and the error of the fixed-point weights and encoding within $P$ (half
# of $P$ each). The tiny example once more, packed:

# %%
packed_keys = ProtocolParameters(
    key_bits=1024, n_max=300, insecure_test_key=True, backend="packed-paillier"
)
packed_session = SecureSession(counts, packed_keys, clip=1.0, sigma=1.0)
packed_result = packed_session.aggregate(deltas, noise, sampled)
layout = packed_session.config.layout
print(
    f"C_LCM for N_max = 2000 has {encoding.lcm_up_to(2000).bit_length()} bits of a 3072-bit key's plaintext"
)
print(
    f"weights of g = {layout.weight_bits} bits, deltas at 2^-{layout.resolution_bits}, slots of "
    f"b = {layout.slot_bits} bits, K = {layout.slots} parameters per ciphertext"
)
print(
    "packed:",
    packed_result,
    "\nplain: ",
    plain,
    "\nmax |difference|:",
    np.abs(packed_result - plain).max(),
)
assert np.abs(packed_result - plain).max() <= packed_keys.precision

# %% [markdown]
# `benchmarks/secure_protocol.py` measures both backends beside the straightforward phe sequence, per round and per
# side, on the paper's artificial grid, the MNIST CNN (21840 parameters, 100 users, 5 silos; a silo's round measured
# on slices of users and extrapolated) and a model of $10^6$ parameters (100 users with records in all 5 silos,
# projected from the same per-parameter costs and checked against one measured round on a larger slice). Its result,
# committed with its provenance by `benchmarks/save.py`:

# %%
from uldp.paper import chapters

chapters.show_protocol_scale()

# %% [markdown]
# What is left:
#
# - **The silo pays for the packing.** Shifting each parameter's ciphertext into its slot costs $b$ squarings modulo
#   $n^2$ per parameter (Horner's rule), on top of the per-user multi-exponentiation; the server's side is where
#   packing pays.
# - **The server's memory and the per-user work.** The server holds every silo's packed update at once (the table
#   gives the bytes per parameter); the rescale adds one decryption and one encryption per user and round on the
#   server, which dominates on the paper's small artificial models (the grid above), where packing cannot help.
# - **Key sizes.** The rescale blind needs $C_{\text{LCM}}$ plus 130 bits inside the modulus, so $N_{\max}$ is bounded
#   by the key as in the paper's protocol, and the slots by $P$: a finer precision widens them.
# - **Assumptions.** The packed backend rests on Paillier's decisional composite residuosity, as the paper's protocol does, and the
#   rescale's blind on a statistical ($2^{-128}$) rather than perfect argument. A lattice (Ring-LWE) backend, which
#   multiplies a ciphertext by thousands of parameters at once, is the next section.

# %% [markdown]
# ## A lattice backend for the round (Ring-LWE)
#
# `uldp.secure.lattice` runs the round of {ref}`Protocol 1 <paper-protocol-1>` in BFV (Microsoft SEAL through
# `tenseal`), selected by `ProtocolParameters(backend="lattice")` in the in-process protocol and hence in
# `RunConfig(secure=True, protocol={"backend": "lattice"})`. The ring dimension is $N = 16384$ and the coefficient
# modulus the fewest 60-bit primes the noise allows, at most the 438 bits of the HE standard's 128-bit table. One
# plaintext-ciphertext product multiplies one user's weight by 16384 parameters. The parties and what they learn are
# those of {ref}`Protocol 1 <paper-protocol-1>`. Every round the packed backend's rescale (Paillier) gives the server $y_u$ and the silos
# $c_u$ with $w_u = y_u - c_u$ (zero for users not sampled). The server sends every silo the same seeded ciphertext
# of all the $y_u$, packed as the coefficients of one polynomial per plaintext prime, afresh only when the sample
# changed. A silo subtracts the $c_u$ and expands it into one $\mathrm{Enc}(w_u)$ per user with the server's Galois
# keys, sent once at set-up (`uldp.secure.lattice_expand`). It adds
# $\sum_u \mathrm{Enc}(w_u) \cdot n_{s,u} E_{s,u}$ and its encoded noise, re-randomises with a public-key
# $\mathrm{Enc}(0)$, floods the noise (smudging, $2^{-40}$), switches the ciphertext down to a power of two (keeping
# only the coefficients that carry parameters) and adds pairwise masks, which cancel exactly in the sum
# (`benchmarks/protocol_traffic.py` measures the bytes per round). The server decrypts only that sum. A slot wider than
# SEAL's 60-bit plaintext modulus (the default $P = 10^{-10}$ needs about 100 bits) is split over two plaintext
# primes (CRT). The module docstring states the security argument: IND-CPA, masking, and circuit privacy by flooding,
# which is the remedy for the decryption-noise leakage of Li and Micciancio. It also says why BFV and not CKKS. The
# measured round (`benchmarks/secure_protocol.py --lattice-only`, merged into the committed results; the
# $10^6$-parameter row is fitted on one- and two-chunk slices and checked on four):

# %%
lattice_results = benchmark_result("secure_protocol")["results"].get("lattice")
if lattice_results is None:
    print(
        "no lattice measurement committed yet: run `python benchmarks/secure_protocol.py --lattice-only`"
    )
else:
    lattice_rows = {
        key: {
            "silo s": lattice_results[key]["silo_s"],
            "silo CPU s": lattice_results[key]["silo_cpu_s"],
            "server s": lattice_results[key]["server_s"],
            "server CPU s": lattice_results[key]["server_cpu_s"],
            "update MB per silo": lattice_results[key]["update_bytes"] / 1e6,
            "weights MB per silo (new sample)": lattice_results[key]["silo_received_bytes"] / 1e6,
        }
        for key in ("mnist", "million")
        if key in lattice_results
    }
    print(pd.DataFrame(lattice_rows).T.round(2).to_string())
    print(
        f"max |error| against the plain sum: {lattice_results['max_abs_error_vs_plain']:.1e} (P = 1e-10); "
        f"load average {lattice_results['load']:.1f} on {lattice_results['cpus']} CPUs during the run"
    )
    million_check = lattice_results["million"]["check"]
    print(
        f"10^6 parameters: fixed plus per-chunk CPU fitted on 1- and 2-chunk slices; measured / projected on "
        f"{million_check['chunks']} chunks: silo {million_check['silo_measured_over_projected']:.2f}, "
        f"server {million_check['server_finish_measured_over_projected']:.2f}"
    )

# %% [markdown]
# Limits of the lattice path: it assumes Ring-LWE rather than Paillier's composite residuosity, and its masks hide
# by a statistical flooding bound rather than perfectly. Its per-round rescale still uses Paillier. The table's rounds
# are new samples' rounds: the silo expands the packed weights, and its CPU seconds include that. Wall seconds
# depend on the machine's load (printed above); the CPU seconds compare across runs. What the packing costs and saves,
# from the committed measurements (`benchmarks/protocol_traffic.py` at the MNIST size, before and after the packing;
# `benchmarks/lattice_workers.py`, one silo's round with a held and with a new sample; and
# `benchmarks/flower_loopback.py --backend lattice`, the hospitals example with
# `UldpStrategy(protocol={"backend": "lattice"})` on a SuperLink and three SuperNodes as separate processes, against
# the same federation in process):

# %%
traffic = benchmark_result("protocol_traffic")
traffic_results = traffic["results"]
lattice_new, lattice_held = (
    traffic_results[f"lattice ({kind})"] for kind in ("new_sample", "held")
)
lattice_before = traffic["before"]["results"]["lattice (new_sample)"]
workers_round = benchmark_result("lattice_workers")
held_cpu, new_cpu = (workers_round["results"][key]["cpu_s"] for key in ("1", "1_new_sample"))
many_workers = benchmark_result("lattice_workers_h200")["results"]
many, cores = many_workers["results"], many_workers["shape"]["cpu_count"]
most = max(int(key) for key in many if key.isdigit())
shared = benchmark_result("lattice_workers_shared")["results"]
shared_count = max(int(key) for key in shared["before"] if key.isdigit())
task_keys = benchmark_result("lattice_workers_task_keys")["results"]
keys_count = max(int(key) for key in task_keys["before"] if key.isdigit())
keys_after, keys_before = task_keys["results"], task_keys["before"]
loopback = benchmark_result("flower_loopback_lattice")["results"]
deployed, inside = loopback["deployed_process_isolation"], loopback["in_process"]
largest, limits = inside["traffic"]["largest_object"], loopback["flower_limits"]
per_silo = inside["traffic"]["per_silo"]
round_kilobytes = ", ".join(
    f"{bytes_['received_bytes'] / 1e3:.0f}"
    for phase, bytes_ in per_silo.items()
    if phase != "set-up"
)
deployed_seconds, inside_seconds = (
    ", ".join(f"{seconds:.1f}" for seconds in run["round_seconds"]) for run in (deployed, inside)
)
grpc_limit = limits["grpc_max_message_length_bytes"]
federation, equal = loopback["federation"], loopback["deployed_equals_in_process"]
print(
    f"- Once per session each silo receives the server's BFV public keys and the Galois keys that expand the "
    f"packed weights: {lattice_new['setup_received_bytes'] / 1e6:.1f} MB at the MNIST size "
    f"({traffic_results['parameters']:,} parameters, {traffic_results['users']} users, "
    f"{traffic_results['silos']} silos), {lattice_new['setup_received_bytes'] / lattice_new['received_bytes']:.0f} "
    f"times what it then receives in a round with a new sample.\n"
    f"- In a round a silo receives {lattice_new['received_bytes'] / 1e6:.2f} MB when the sample is new (one "
    f"packed ciphertext per plaintext prime; {lattice_before['received_bytes'] / 1e6:.0f} MB before the packing, "
    f"at {traffic['before']['git_commit'][:7]}) and {lattice_held['received_bytes'] / 1e6:.2f} MB when it holds "
    f"the sample's weights; packed Paillier's silo receives "
    f"{traffic_results['packed-paillier']['received_bytes'] / 1e6:.2f} MB in every round.\n"
    f"- A new sample costs the silo CPU: the expansion's key switches make its round at "
    f"{workers_round['shape']['parameters']:,} parameters and {workers_round['shape']['users']} users take "
    f"{new_cpu:.2f} s of CPU against {held_cpu:.2f} s with a sample it holds (one worker; "
    f"{new_cpu / held_cpu:.1f} times; the held round reuses the expansion its worker process kept). At q = 1 and "
    f"with the silos' hidden sample only the first round's weights are new; a server-drawn sample at q < 1 is new "
    f"every round.\n"
    f"- Spread over worker processes, on a lent machine's {cores} cores (`lattice_workers_h200`, "
    f"{many_workers['shape']['parameters']:,} parameters): {most} workers made a held round "
    f"{many['1']['wall_s'] / many[str(most)]['wall_s']:.1f} times faster than one, at "
    f"{many[str(most)]['cpu_s'] / many['1']['cpu_s']:.2f} times its CPU seconds, and a new sample's round "
    f"{many['1_new_sample']['wall_s'] / many[f'{most}_new_sample']['wall_s']:.1f} times faster, at "
    f"{many[f'{most}_new_sample']['cpu_s'] / many['1_new_sample']['cpu_s']:.1f} times its CPU: at that commit "
    f"(`{benchmark_result('lattice_workers_h200')['provenance']['git_commit'][:7]}`) every worker expanded all the "
    f"new weights of its primes. The silo now expands them once, split between its workers by residue class of "
    f"the users, and every worker reads them: on this project's {shared['shape']['cpu_count']}-core machine at "
    f"{shared_count} workers (`lattice_workers_shared`, {shared['shape']['parameters']:,} parameters), a new "
    f"sample's round took {shared['results'][f'{shared_count}_new_sample']['cpu_s']:.1f} s of CPU against "
    f"{shared['before'][f'{shared_count}_new_sample']['cpu_s']:.1f} s before "
    f"(`{shared['before']['git_commit'][:7]}`), and {shared['results'][f'{shared_count}_new_sample']['wall_s']:.1f} s "
    f"of wall against {shared['before'][f'{shared_count}_new_sample']['wall_s']:.1f} s. Every worker's task also "
    f"carried the server's Galois keys each round, pickled, sent and hashed by each; the silo now writes them beside "
    f"the rows, and a worker reads them only to expand: at {keys_count} workers on "
    f"{task_keys['shape']['cpu_count']} cores (`lattice_workers_task_keys`) a "
    f"held round took {keys_after[str(keys_count)]['cpu_s']:.2f} s of CPU against "
    f"{keys_before[str(keys_count)]['cpu_s']:.2f} s before (`{keys_before['git_commit'][:7]}`), "
    f"{keys_after[str(keys_count)]['cpu_s'] / keys_after['1']['cpu_s']:.2f} times one worker's.\n"
    f"- Over real processes ({federation['hospitals']} SuperNodes and a SuperLink on loopback, Flower "
    f"{limits['flwr']}, whose SuperLink served the silos over its Fleet {deployed['fleet_transport']}; "
    f"{federation['patients']} patients, {federation['parameters']:,} parameters, {federation['rounds']} rounds "
    f"at q = {federation['q']:g}): the set-up took {deployed['setup_seconds']:.0f} s deployed and "
    f"{inside['setup_seconds']:.0f} s in process, and each silo received "
    f"{per_silo['set-up']['received_bytes'] / 1e6:.1f} MB in it (more than at the MNIST size: the example clips "
    f"at ten times the MNIST setting's C, which widens the coefficient modulus and so the keys). The largest single object "
    f"Flower moved, one request, was {largest['largest_object_bytes'] / 1e6:.1f} MB (the {largest['stage']!r} "
    f"stage, a ConfigRecord: Flower cuts only arrays into chunks of "
    f"{limits['array_chunk_bytes'] / 2**20:.0f} MiB), {largest['largest_object_bytes'] / grpc_limit:.1%} of "
    f"Flower's gRPC message limit ({grpc_limit:,} bytes); its HTTP routes set none.\n"
    f"- Its rounds took {deployed_seconds} s deployed and {inside_seconds} s in process; each silo received "
    f"{round_kilobytes} kB in them (round 1 carries the packed weights of the first sample; at q = 1 every later "
    f"round has the same sample, and the silo keeps its weights). The deployed model differs from the "
    f"in-process one by at most {equal['max_abs_difference']:.1e} per parameter, "
    f"{'within' if equal['equal_within_tolerance'] else 'beyond'} the tolerance of float32 summation order "
    f"(rtol {equal['rtol']:g}, atol {equal['atol']:g}; the protocol's resolution P is far below it).\n"
    f"- Load average on {loopback['machine']['cpu_count']} shared cores while it ran: "
    f"{loopback['machine']['load_average_1_5_15_before'][0]:.1f} before, "
    f"{loopback['machine']['load_average_1_5_15_after'][0]:.1f} after."
)
